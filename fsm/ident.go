package fsm

import (
	"unique"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// Ident is a string of few distinct values that a great many jobs repeat
// (the role or worker a job is meant for, the actor who created it), held
// in one word instead of a string header's two: a unique.Handle, whose
// zero value stands for "". Equal strings make equal Idents, so Idents
// compare as their strings do. Every encoding (log entries, snapshots, the
// API) carries the string, exactly as before.
type Ident struct{ h unique.Handle[string] }

// IdentOf is s as an Ident.
func IdentOf(s string) Ident {
	if s == "" {
		return Ident{}
	}
	return Ident{unique.Make(s)}
}

// String is the string i stands for.
func (i Ident) String() string {
	if i == (Ident{}) {
		return ""
	}
	return i.h.Value()
}

// MarshalText and UnmarshalText carry i as its string (a version 1
// snapshot's msgpack, JSON).
func (i Ident) MarshalText() ([]byte, error) { return []byte(i.String()), nil }

func (i *Ident) UnmarshalText(p []byte) error {
	*i = IdentOf(string(p))
	return nil
}

// CodecEncodeSelf and CodecDecodeSelf carry i as its string in msgpack
// (a version 1 snapshot's jobs).
func (i Ident) CodecEncodeSelf(e *codec.Encoder) { e.MustEncode(i.String()) }
func (i *Ident) CodecDecodeSelf(d *codec.Decoder) {
	var s string
	d.MustDecode(&s)
	*i = IdentOf(s)
}

// ident is a string field held as an Ident (read through the decode's
// interner, so a value met before costs no allocation).
func (f *fields) ident(n int, p *Ident) {
	s := p.String()
	f.istr(n, &s)
	if !f.w {
		*p = IdentOf(s)
	}
}
