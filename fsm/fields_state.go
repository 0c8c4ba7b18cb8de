package fsm

// The fields of the stored objects, as version 10 snapshot records carry
// them (fields.go). Each list is the object's whole record: a field added
// to an object is one line here, and a reader of an earlier build skips it.

func (j *Job) fields(f *fields) {
	// The extra part is read into a value on the stack and kept only if
	// it holds something, so a plain job reads without allocating it.
	var local JobExtra
	x := &local
	if f.w {
		x = j.Extra()
	}
	f.str(1, &j.ID)
	f.istr(2, &j.Stream)
	f.ident(3, &j.Target)
	f.bytes(4, &j.Payload)
	f.istr(5, (*string)(&j.State))
	f.i32(6, &j.Attempts)
	f.i32(7, &j.MaxAttempts)
	f.i32(8, &j.Priority)
	f.i64(9, &j.NotBefore)
	f.i32(10, &j.BackoffBase)
	f.i32(11, &j.BackoffMax)
	f.istr(12, &x.ConcurrencyKey)
	f.int(13, &x.ConcurrencyLimit)
	f.istr(14, &x.Requires)
	f.istr(15, &x.ClaimCaps)
	f.strs(16, &x.NotFor)
	f.strs(17, &x.DependsOn)
	f.int(18, &x.DepsPending)
	f.bool(19, &x.RunOnDepFailure)
	f.i64(20, &x.LeaseSeconds)
	f.istr(21, &x.TaskClass)
	f.str(22, &j.IdempotencyKey)
	f.istr(23, &x.ToolName)
	f.i64(24, &x.Timeout)
	f.str(25, &x.ClonedFrom)
	objPtr(f, 26, &x.Route)
	objPtr(f, 27, &j.Lease)
	f.i64(28, &x.CancelRequestedAt)
	f.str(29, &x.CancelReason)
	f.bytes(30, &x.Progress)
	f.i64(31, &x.ProgressAt)
	f.bytes(32, &x.Checkpoint)
	f.i64(33, &x.CheckpointAt)
	f.bytes(34, &j.Result)
	objPtr(f, 35, &j.Error)
	f.str(36, &x.Stdout)
	f.str(37, &x.Stderr)
	objs(f, 38, &x.Comments)
	// The trail: written from a sealed one as it is (trail_open.go); read
	// into a decoder's scratch arrays when it has them (taggedJob) and
	// kept by the caller, who folds the created event. The history is
	// written whole, its created event first (history.go); a reader keeps
	// it as the creator again (setHistory).
	var tr trail
	created := func() {
		if j.creator != (Ident{}) {
			ev := j.createdEvent()
			at, last := f.open(40)
			ev.fields(f)
			f.close(at, last)
		}
	}
	switch {
	case f.w && j.sealed != nil:
		writeSealed(f, j.packed(), j.CreatedAt, 39, 40, created)
	case f.w:
		tr.attempts, tr.history = j.trailParts()
		objs(f, 39, &tr.attempts)
		created()
		objs(f, 40, &tr.history)
	default:
		if j.trail != nil {
			tr.attempts, tr.history = j.trail.attempts[:0], j.trail.history[:0]
		}
		objs(f, 39, &tr.attempts)
		objs(f, 40, &tr.history)
	}
	f.i64(41, &j.CreatedAt)
	f.i64(42, &j.UpdatedAt)
	f.i64(43, &j.StartedAt)
	f.i64(44, &j.FinishedAt)
	f.u64(45, &j.CreateIndex)
	f.u64(46, &j.QueueIndex)
	f.u64(47, &j.ModifyIndex)
	f.schema(48, &x.ResultSchema)
	f.istr(49, &x.Schedule)
	objPtr(f, 50, &x.Rate)
	if !f.w && !local.isZero() {
		j.extra = new(JobExtra)
		*j.extra = local
	}
	switch {
	case f.w:
	case j.trail != nil: // the decoder's scratch (taggedJob)
		j.trail.attempts, j.trail.history = tr.attempts, tr.history
	default:
		j.setTrail(tr.attempts, tr.history)
	}
}

func (r *RouteSpec) fields(f *fields) {
	f.strs(1, &r.Capabilities)
	f.labels(2, &r.Labels)
	f.str(3, &r.Key)
	f.i64(4, &r.dispatchedAt)
	f.i64(5, &r.acceptedAt)
	f.strs(6, &r.refused)
}

func (l *Lease) fields(f *fields) {
	f.istr(1, &l.Owner)
	f.istr(2, &l.WorkerID)
	f.str(3, &l.AttemptID)
	f.str(4, &l.Token)
	f.i64(5, &l.ExpiresAt)
}

func (c *Comment) fields(f *fields) {
	f.i64(1, &c.At)
	f.istr(2, &c.Actor)
	f.str(3, &c.Text)
}

func (a *Attempt) fields(f *fields) {
	f.str(1, &a.ID)
	f.istr(2, &a.Owner)
	f.istr(3, &a.WorkerID)
	f.str(4, &a.Token)
	f.i64(5, &a.StartedAt)
	f.i64(6, &a.RunningAt)
	f.i64(7, &a.EndedAt)
	f.istr(8, (*string)(&a.Outcome))
	objPtr(f, 9, &a.Error)
	f.bool(10, &a.Requeued)
	f.bool(11, &a.DLQ)
	f.bool(12, &a.ByHolder)
}

func (e *Event) fields(f *fields) {
	f.i32(1, &e.Seq)
	f.i64(2, &e.At)
	f.word(3, (*name)(&e.Type))
	f.istr(4, &e.Actor)
	f.word(5, (*name)(&e.From))
	f.word(6, (*name)(&e.To))
	f.str(7, &e.AttemptID)
	f.istr(8, &e.WorkerID)
	f.str(9, &e.Text)
}

func (b *Blob) fields(f *fields) {
	f.str(1, &b.ID)
	f.i64(2, &b.Size)
	f.istr(3, &b.ContentType)
	f.int(4, &b.Chunks)
	f.i64(5, &b.CreatedAt)
}

func (c *BlobChunk) fields(f *fields) {
	f.str(1, &c.BlobID)
	f.int(2, &c.Seq)
	f.bytes(3, &c.Data)
}

func (s *Session) fields(f *fields) {
	f.str(1, &s.ID)
	f.str(2, &s.Name)
	f.str(3, &s.Description)
	f.istr(4, &s.Status)
	f.i64(5, &s.StartedAt)
	f.i64(6, &s.EndedAt)
	f.i64(7, &s.UpdatedAt)
	f.u64(8, &s.CreateIndex)
}

func (s *Stream) fields(f *fields) {
	f.str(1, &s.ID)
	f.str(2, &s.Name)
	f.str(3, &s.Session)
	f.str(4, &s.Instructions)
	f.istr(5, &s.Status)
	f.i64(6, &s.CreatedAt)
	f.i64(7, &s.EndedAt)
	f.i64(8, &s.UpdatedAt)
	f.u64(9, &s.CreateIndex)
}

func (g *Gateway) fields(f *fields) {
	f.str(1, &g.ID)
	f.str(2, &g.Address)
	f.labels(3, &g.Metadata)
	f.int(4, &g.Capacity)
	f.istr(5, &g.Health)
	f.i64(6, &g.HealthAt)
	f.i64(7, &g.RegisteredAt)
	f.i64(8, &g.UpdatedAt)
	f.u64(9, &g.CreateIndex)
	f.istr(10, &g.Delivery)
	f.istr(11, &g.Role)
	f.str(12, &g.Secret)
}

func (w *Worker) fields(f *fields) {
	f.str(1, &w.ID)
	f.istr(2, &w.Gateway)
	f.strs(3, &w.Capabilities)
	f.labels(4, &w.Metadata)
	f.int(5, &w.Capacity)
	f.istr(6, &w.Health)
	f.i64(7, &w.HealthAt)
	f.i64(8, &w.RegisteredAt)
	f.i64(9, &w.UpdatedAt)
	f.u64(10, &w.CreateIndex)
}

func (b *WorkerBinding) fields(f *fields) {
	f.str(1, &b.ID)
	f.istr(2, &b.Role)
	f.i64(3, &b.BoundAt)
	f.i64(4, &b.SeenAt)
}

func (e *FeedEvent) fields(f *fields) {
	f.u64(1, &e.Seq)
	f.u64(2, &e.Index)
	f.i64(3, &e.At)
	f.istr(4, &e.Kind)
	f.str(5, &e.ID)
	f.istr(6, &e.Type)
	f.istr(7, &e.Actor)
	f.istr(8, &e.From)
	f.istr(9, &e.To)
	f.istr(10, &e.Stream)
	f.istr(11, (*string)(&e.Task))
	f.str(12, &e.AttemptID)
	f.istr(13, &e.WorkerID)
	f.str(14, &e.Text)
	f.istr(15, &e.Token)
}

func (p *StreamPause) fields(f *fields) {
	f.str(1, &p.Stream)
	f.i64(2, &p.PausedAt)
	f.istr(3, &p.Actor)
	f.str(4, &p.Reason)
	f.u64(5, &p.Index)
}

func (d *StreamDefaults) fields(f *fields) {
	f.str(1, &d.Stream)
	f.istr(2, &d.ConcurrencyKey)
	f.int(3, &d.ConcurrencyLimit)
	f.i64(4, &d.SetAt)
	f.istr(5, &d.Actor)
	f.u64(6, &d.Index)
	f.schema(7, &d.ResultSchema)
	objPtr(f, 8, &d.Rate)
}

func (c *CapsSeen) fields(f *fields) {
	f.str(1, &c.Key)
	f.i64(2, &c.At)
}

func (h *feedHead) fields(f *fields) { f.u64(1, &h.seq) }

func (l *levelRecord) fields(f *fields) { f.int(1, &l.level) }
