package fsm

// Per-object record codecs of the snapshot: how each kind of object (job,
// session, stream, blob, chunk, gateway, worker, binding) is encoded and
// decoded. The rows of the record table (snapshot_table.go) call them.

// levelRecord is the cluster's level in a snapshot.
type levelRecord struct{ level int }

func (e *enc) binding(b *WorkerBinding) {
	e.str(b.ID)
	e.str(b.Role)
	e.varint(b.BoundAt)
	e.varint(b.SeenAt)
}

func (d *dec) binding() *WorkerBinding {
	return &WorkerBinding{ID: d.str(), Role: d.istr(), BoundAt: d.varint(), SeenAt: d.varint()}
}

func (e *enc) gateway(g *Gateway) {
	e.str(g.ID)
	e.str(g.Address)
	e.labels(g.Metadata)
	e.int(g.Capacity)
	e.str(g.Health)
	e.varint(g.HealthAt)
	e.varint(g.RegisteredAt)
	e.varint(g.UpdatedAt)
	e.uvarint(g.CreateIndex)
	if g.Delivery != "" || g.Role != "" || g.Secret != "" {
		e.str(g.Delivery) // the optional tail (from LevelDelivery on)
		e.str(g.Role)
		e.str(g.Secret)
	}
}

func (d *dec) gateway() *Gateway {
	g := &Gateway{ID: d.str(), Address: d.str(), Metadata: d.labels(), Capacity: d.int(), Health: d.istr(),
		HealthAt: d.varint(), RegisteredAt: d.varint(), UpdatedAt: d.varint(), CreateIndex: d.uvarint()}
	if d.more() {
		g.Delivery, g.Role, g.Secret = d.istr(), d.istr(), d.str()
	}
	return g
}

func (e *enc) worker(w *Worker) {
	e.str(w.ID)
	e.str(w.Gateway)
	e.strs(w.Capabilities)
	e.labels(w.Metadata)
	e.int(w.Capacity)
	e.str(w.Health)
	e.varint(w.HealthAt)
	e.varint(w.RegisteredAt)
	e.varint(w.UpdatedAt)
	e.uvarint(w.CreateIndex)
}

func (d *dec) worker() *Worker {
	return &Worker{ID: d.str(), Gateway: d.istr(), Capabilities: d.strs(), Metadata: d.labels(), Capacity: d.int(),
		Health: d.istr(), HealthAt: d.varint(), RegisteredAt: d.varint(), UpdatedAt: d.varint(), CreateIndex: d.uvarint()}
}

// Object encodings of snapshot version 2.

func (e *enc) optError(je *JobError) {
	e.bool(je != nil)
	if je != nil {
		e.jobError(je)
	}
}

func (d *dec) optError() *JobError {
	if !d.bool() {
		return nil
	}
	je := d.jobError()
	return &je
}

func (e *enc) job(j *Job, version int) {
	e.str(j.ID)
	e.str(j.Stream)
	e.str(j.Target.String())
	e.bytes(j.Payload)
	e.str(string(j.State))
	e.int(int(j.Attempts))
	e.int(int(j.MaxAttempts))
	e.varint(j.Extra().LeaseSeconds)
	e.str(j.Extra().TaskClass)
	e.str(j.IdempotencyKey)
	e.bool(j.Lease != nil)
	if l := j.Lease; l != nil {
		e.str(l.Owner)
		e.str(l.WorkerID)
		e.str(l.AttemptID)
		e.str(l.Token)
		e.varint(l.ExpiresAt)
	}
	e.bytes(j.Result)
	e.optError(j.Error)
	e.str(j.Extra().Stdout)
	e.str(j.Extra().Stderr)
	e.uvarint(uint64(len(j.Extra().Comments)))
	for _, c := range j.Extra().Comments {
		e.varint(c.At)
		e.str(c.Actor)
		e.str(c.Text)
	}
	attempts, history := j.trailParts()
	e.uvarint(uint64(len(attempts)))
	for i := range attempts {
		a := &attempts[i]
		e.str(a.ID)
		e.str(a.Owner)
		e.str(a.WorkerID)
		e.str(a.Token)
		e.varint(a.StartedAt)
		e.varint(a.EndedAt)
		e.str(string(a.Outcome))
		e.optError(a.Error)
		e.bool(a.Requeued)
		e.bool(a.DLQ)
		e.bool(a.ByHolder)
	}
	if j.creator != (Ident{}) {
		history = append([]Event{j.createdEvent()}, history...)
	}
	e.uvarint(uint64(len(history)))
	for i := range history {
		ev := &history[i]
		e.int(int(ev.Seq))
		e.varint(ev.At)
		e.str(ev.Type.String())
		e.str(ev.Actor)
		e.str(ev.From.String())
		e.str(ev.To.String())
		e.str(ev.AttemptID)
		e.str(ev.WorkerID)
		e.str(ev.Text)
	}
	e.varint(j.CreatedAt)
	e.varint(j.UpdatedAt)
	e.varint(j.StartedAt)
	e.varint(j.FinishedAt)
	e.uvarint(j.CreateIndex)
	e.uvarint(j.QueueIndex)
	e.uvarint(j.ModifyIndex)
	if version >= 3 {
		e.str(j.Extra().ToolName)
		e.varint(j.Extra().Timeout)
		e.str(j.Extra().ClonedFrom)
	}
	if version >= 4 {
		e.bool(j.Extra().Route != nil)
		if j.Extra().Route != nil {
			e.strs(j.Extra().Route.Capabilities)
			e.labels(j.Extra().Route.Labels)
			e.str(j.Extra().Route.Key)
		}
	}
	if version >= 5 {
		for i := range attempts {
			e.varint(attempts[i].RunningAt)
		}
	}
	if version >= 6 {
		e.varint(j.Extra().CancelRequestedAt)
		e.str(j.Extra().CancelReason)
		e.bytes(j.Extra().Progress)
		e.varint(j.Extra().ProgressAt)
		e.bytes(j.Extra().Checkpoint)
		e.varint(j.Extra().CheckpointAt)
		e.int(int(j.Priority))
		e.varint(j.NotBefore)
		e.varint(int64(j.BackoffBase))
		e.varint(int64(j.BackoffMax))
		e.str(j.Extra().ConcurrencyKey)
		e.int(j.Extra().ConcurrencyLimit)
		e.strs(j.Extra().DependsOn)
		e.int(j.Extra().DepsPending)
	}
	if version >= 7 {
		e.str(j.Extra().Requires)
		e.str(j.Extra().ClaimCaps)
		e.strs(j.Extra().NotFor)
	}
	if version >= 8 {
		e.bool(j.Extra().RunOnDepFailure)
	}
	// The optional tail: a routed task's delivery (from LevelDelivery on,
	// so only builds that read it meet it).
	if j.Extra().Route != nil && j.Extra().Route.hasDelivery() {
		e.varint(j.Extra().Route.dispatchedAt)
		e.varint(j.Extra().Route.acceptedAt)
		e.strs(j.Extra().Route.refused)
	}
}

func (d *dec) job(version int) *Job {
	var j Job
	j.ID = d.str()
	j.Stream = d.istr()
	j.Target = IdentOf(d.istr())
	j.Payload = d.bytes()
	j.State = State(d.istr())
	j.Attempts = d.i32(d.int())
	j.MaxAttempts = d.i32(d.int())
	j.extraMut().LeaseSeconds = d.varint()
	j.extraMut().TaskClass = d.istr()
	j.IdempotencyKey = d.str()
	if d.bool() {
		j.Lease = &Lease{Owner: d.istr(), WorkerID: d.istr(), AttemptID: d.str(), Token: d.str(), ExpiresAt: d.varint()}
	}
	j.Result = d.bytes()
	j.Error = d.optError()
	j.extraMut().Stdout = d.str()
	j.extraMut().Stderr = d.str()
	if n := d.count(3); n > 0 {
		j.extraMut().Comments = make([]Comment, n)
		for i := range j.Extra().Comments {
			j.Extra().Comments[i] = Comment{At: d.varint(), Actor: d.istr(), Text: d.str()}
		}
	}
	var attempts []Attempt
	if n := d.count(10); n > 0 {
		attempts = make([]Attempt, n)
		for i := range attempts {
			attempts[i] = Attempt{ID: d.str(), Owner: d.istr(), WorkerID: d.istr(), Token: d.str(),
				StartedAt: d.varint(), EndedAt: d.varint(), Outcome: Outcome(d.istr()), Error: d.optError(),
				Requeued: d.bool(), DLQ: d.bool(), ByHolder: d.bool()}
		}
	}
	var h []Event
	if n := d.count(9); n > 0 {
		h = make([]Event, n)
	}
	for i := range h {
		h[i] = Event{Seq: d.i32(d.int()), At: d.varint(), Type: EventType(d.word()), Actor: d.istr(),
			From: StateCode(d.word()), To: StateCode(d.word()), AttemptID: d.str(), WorkerID: d.istr(), Text: d.istr()}
	}
	j.CreatedAt = d.varint()
	j.UpdatedAt = d.varint()
	j.StartedAt = d.varint()
	j.FinishedAt = d.varint()
	j.CreateIndex = d.uvarint()
	j.QueueIndex = d.uvarint()
	j.ModifyIndex = d.uvarint()
	if version >= 3 {
		j.extraMut().ToolName = d.istr()
		j.extraMut().Timeout = d.varint()
		j.extraMut().ClonedFrom = d.str()
	}
	if version >= 4 && d.bool() {
		j.extraMut().Route = &RouteSpec{Capabilities: d.strs(), Labels: d.labels(), Key: d.str()}
	}
	if version >= 5 {
		for i := range attempts {
			attempts[i].RunningAt = d.varint()
		}
	}
	if version >= 6 {
		j.extraMut().CancelRequestedAt = d.varint()
		j.extraMut().CancelReason = d.str()
		j.extraMut().Progress = d.bytes()
		j.extraMut().ProgressAt = d.varint()
		j.extraMut().Checkpoint = d.bytes()
		j.extraMut().CheckpointAt = d.varint()
		j.Priority = d.i32(d.int())
		j.NotBefore = d.varint()
		j.BackoffBase = d.i32(d.int())
		j.BackoffMax = d.i32(d.int())
		j.extraMut().ConcurrencyKey = d.istr()
		j.extraMut().ConcurrencyLimit = d.int()
		j.extraMut().DependsOn = d.strs()
		j.extraMut().DepsPending = d.int()
	}
	if version >= 7 {
		j.extraMut().Requires = d.istr()
		j.extraMut().ClaimCaps = d.istr()
		j.extraMut().NotFor = d.strs()
	}
	if version >= 8 {
		j.extraMut().RunOnDepFailure = d.bool()
	}
	if j.Extra().Route != nil && d.more() {
		r := j.Extra().Route
		r.dispatchedAt, r.acceptedAt, r.refused = d.varint(), d.varint(), d.strs()
	}
	j.compactExtra()
	j.setTrail(attempts, nil)
	j.adoptHistory(h)
	j.sealIfFinished()
	jp := new(Job)
	*jp = j
	return jp
}

func (e *enc) session(s *Session) {
	e.str(s.ID)
	e.str(s.Name)
	e.str(s.Description)
	e.str(s.Status)
	e.varint(s.StartedAt)
	e.varint(s.EndedAt)
	e.varint(s.UpdatedAt)
	e.uvarint(s.CreateIndex)
}

func (d *dec) session() *Session {
	return &Session{ID: d.str(), Name: d.str(), Description: d.str(), Status: d.istr(),
		StartedAt: d.varint(), EndedAt: d.varint(), UpdatedAt: d.varint(), CreateIndex: d.uvarint()}
}

func (e *enc) stream(s *Stream) {
	e.str(s.ID)
	e.str(s.Name)
	e.str(s.Session)
	e.str(s.Instructions)
	e.str(s.Status)
	e.varint(s.CreatedAt)
	e.varint(s.EndedAt)
	e.varint(s.UpdatedAt)
	e.uvarint(s.CreateIndex)
}

func (d *dec) stream() *Stream {
	return &Stream{ID: d.str(), Name: d.str(), Session: d.str(), Instructions: d.str(), Status: d.istr(),
		CreatedAt: d.varint(), EndedAt: d.varint(), UpdatedAt: d.varint(), CreateIndex: d.uvarint()}
}

func (e *enc) blob(b *Blob) {
	e.str(b.ID)
	e.varint(b.Size)
	e.str(b.ContentType)
	e.int(b.Chunks)
	e.varint(b.CreatedAt)
}

func (d *dec) blob() *Blob {
	return &Blob{ID: d.str(), Size: d.varint(), ContentType: d.istr(), Chunks: d.int(), CreatedAt: d.varint()}
}

func (e *enc) chunk(c *BlobChunk) {
	e.str(c.BlobID)
	e.int(c.Seq)
	e.bytes(c.Data)
}

func (d *dec) chunk() *BlobChunk {
	return &BlobChunk{BlobID: d.str(), Seq: d.int(), Data: d.bytes()}
}
