package fsm

// BlobCommitCommand makes an uploaded blob readable once all its chunks are
// stored.
type BlobCommitCommand struct {
	Now         int64
	BlobID      string
	Size        int64
	ContentType string
	Chunks      int
}

func init() {
	register(CmdBlobCommit, "blob_commit", func() command { return new(BlobCommitCommand) })
}

func (c *BlobCommitCommand) encode(e *enc) {
	e.varint(c.Now)
	e.str(c.BlobID)
	e.varint(c.Size)
	e.str(c.ContentType)
	e.int(c.Chunks)
}

func (c *BlobCommitCommand) decode(d *dec) {
	c.Now = d.varint()
	c.BlobID = d.str()
	c.Size = d.varint()
	c.ContentType = d.istr()
	c.Chunks = d.int()
}

func (c *BlobCommitCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.str(2, &c.BlobID)
	f.i64(3, &c.Size)
	f.istr(4, &c.ContentType)
	f.int(5, &c.Chunks)
}

func (c *BlobCommitCommand) apply(a *applier) *Result { return a.blobCommit(c) }
