package fsm

import (
	"fmt"
	"reflect"
)

// The command table. Every command type is one row, registered by the file
// that defines the command (cmd_*.go): its name, and a constructor for its
// struct, which lists the struct's fields (the tagged encoding, fields.go)
// and applies it to the state. Encode, decode, apply, String and the tests
// that cover every command (the codec round trip, the determinism oracle,
// the snapshot round trip) all read the table, so a new command is one new
// file, and a new field one line of its fields method.
//
// Entries of builds before LevelTagged are in the positional encoding
// (bodyV1, codec.go), and some operations had several command types, one
// per set of options (create, create-ex, create-requires, create-opts).
// Those types are rows too, registered with registerForm: each names the
// command it is now a form of and reads its positional body into that
// command. Below LevelTagged a leader still writes entries as those builds
// do (encodeV1), so every replica of a rolling upgrade reads them.

// command is what a row's struct does: list its fields and apply itself to
// the state.
type command interface {
	fielder
	apply(a *applier) *Result
}

// v1Codec is the positional body of a command that had one form.
type v1Codec interface {
	encode(e *enc)
	decode(d *dec)
}

// formEncoder is a command that had several forms: it writes the
// positional body of the oldest form that carries its fields, and says
// which form that is.
type formEncoder interface {
	encodeV1(e *enc) CommandType
}

// formSetter is a command that records the form an old entry had: some
// forms applied with side effects of their own (snapshot flags).
type formSetter interface{ setForm(t CommandType) }

type commandRow struct {
	name string
	new  func() command
	typ  reflect.Type // the struct type (not the pointer)
	// form: this type is an old form of command type of (decodeV1 reads
	// its positional body into a command of that type).
	of       CommandType
	decodeV1 func(d *dec, t CommandType) command
}

var commandTable [256]*commandRow

// register adds a command type to the table. A type is registered once.
func register(t CommandType, name string, newCmd func() command) {
	if commandTable[t] != nil {
		panic(fmt.Sprintf("fsm: command type %d registered twice (%s, %s)", uint8(t), commandTable[t].name, name))
	}
	commandTable[t] = &commandRow{name: name, new: newCmd, typ: reflect.TypeOf(newCmd()).Elem()}
}

// registerForm adds an old form of command type of: entries of type t
// (positional bodies) decode into an of command. The row of of itself
// may set decodeV1 too (the form of its own type).
func registerForm(t CommandType, name string, of CommandType, newOf func() command, decodeV1 func(d *dec, t CommandType) command) {
	if t != of {
		register(t, name, newOf)
	}
	row := commandTable[t]
	row.of, row.decodeV1 = of, decodeV1
}

// current reports whether t is a type a leader writes from LevelTagged on
// (not an old form of another).
func (t CommandType) current() bool {
	row := commandTable[t]
	return row != nil && (row.of == 0 || row.of == t)
}

// LatestCommand is the newest command type without IgnoreUnknownFlag this
// state machine applies. A node gossips it beside its level, so the level
// of a build from before levels were gossiped can be told from it.
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
