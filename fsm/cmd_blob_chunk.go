package fsm

// BlobChunkCommand stores one chunk of a blob being uploaded.
type BlobChunkCommand struct {
	BlobID string
	Seq    int
	Data   []byte
}

func init() {
	register(CmdBlobChunk, "blob_chunk", func() command { return new(BlobChunkCommand) })
}

func (c *BlobChunkCommand) encode(e *enc) {
	e.str(c.BlobID)
	e.int(c.Seq)
	e.bytes(c.Data)
}

func (c *BlobChunkCommand) decode(d *dec) {
	c.BlobID = d.str()
	c.Seq = d.int()
	c.Data = d.bytes()
}

func (c *BlobChunkCommand) fields(f *fields) {
	f.str(1, &c.BlobID)
	f.int(2, &c.Seq)
	f.bytes(3, &c.Data)
}

func (c *BlobChunkCommand) apply(a *applier) *Result { return a.blobChunk(c) }
