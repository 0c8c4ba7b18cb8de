package fsm

import (
	"fmt"
	"reflect"
)

// The command table. Every command type is one row, registered by the file
// that defines the command (cmd_*.go): its name, and a constructor for its
// struct, which carries the body's binary codec and its apply. Encode,
// decode, apply, String and the tests that cover every command (the codec
// round trip, the determinism oracle, the snapshot round trip) all read the
// table, so a new command is one new file.

// command is what a row's struct does: write and read its body (after the
// body-format byte) and apply itself to the state.
type command interface {
	encode(e *enc)
	decode(d *dec)
	apply(a *applier) *Result
}

type commandRow struct {
	name string
	new  func() command
	typ  reflect.Type // the struct type (not the pointer)
}

var commandTable [256]*commandRow

// register adds a command type to the table. A type is registered once.
func register(t CommandType, name string, newCmd func() command) {
	if commandTable[t] != nil {
		panic(fmt.Sprintf("fsm: command type %d registered twice (%s, %s)", uint8(t), commandTable[t].name, name))
	}
	commandTable[t] = &commandRow{name: name, new: newCmd, typ: reflect.TypeOf(newCmd()).Elem()}
}

// LatestCommand is the newest command type without IgnoreUnknownFlag this
// state machine applies: a node gossips it, and a leader proposes a type
// only once every node applies it (cluster.Node.AllServersApply).
func LatestCommand() CommandType {
	latest := CommandType(0)
	for _, t := range registered() {
		if t&IgnoreUnknownFlag == 0 && t > latest {
			latest = t
		}
	}
	return latest
}

// registered returns the command types in the table, in order.
func registered() []CommandType {
	var out []CommandType
	for t, row := range commandTable {
		if row != nil {
			out = append(out, CommandType(t))
		}
	}
	return out
}

func (t CommandType) String() string {
	if row := commandTable[t]; row != nil {
		return row.name
	}
	return fmt.Sprintf("command(%d)", uint8(t))
}

// newCommand returns a pointer to a zero command struct of type t, or nil.
func newCommand(t CommandType) command {
	if row := commandTable[t]; row != nil {
		return row.new()
	}
	return nil
}

// asCommand returns cmd as the table's command for t: cmd is the command's
// struct or a pointer to it. ok is false when cmd is no command of the
// table at all; err when it is one of another type than t.
func asCommand(t CommandType, cmd any) (c command, ok bool, err error) {
	c, isCmd := cmd.(command)
	if !isCmd {
		// A struct passed by value: its pointer is the command.
		v := reflect.ValueOf(cmd)
		if !v.IsValid() || v.Kind() != reflect.Struct {
			return nil, false, nil
		}
		p := reflect.New(v.Type())
		p.Elem().Set(v)
		if c, isCmd = p.Interface().(command); !isCmd {
			return nil, false, nil
		}
	}
	row := commandTable[t]
	if row == nil || reflect.TypeOf(c).Elem() != row.typ {
		return nil, true, fmt.Errorf("encode %s: command is a %T", t, cmd)
	}
	return c, true, nil
}
