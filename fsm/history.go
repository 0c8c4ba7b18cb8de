package fsm

// A job's event history. Most jobs are made by a plain create, whose
// created event says nothing the job does not already hold but its actor:
// {Seq 1, At CreatedAt, created, To queued, Actor}. Such a job keeps that
// event as its creator alone, and its history slice holds the events after
// it. History, NumEvents and EventAt give the whole history either way;
// the snapshot writes it whole, and reading one folds the event back.

// virtualCreated is 1 when j's created event is kept as its creator, else 0:
// the index in j.events() of event i is i minus it.
func (j *Job) virtualCreated() int {
	if j.creator != (Ident{}) {
		return 1
	}
	return 0
}

// NumEvents is the number of events in j's history.
func (j *Job) NumEvents() int { return j.numStored() + j.virtualCreated() }

// EventAt returns event i of j's history, the oldest being 0. On a
// sealed trail each call opens it: to walk a finished job's events, take
// History once.
func (j *Job) EventAt(i int) Event {
	v := j.virtualCreated()
	if i < v {
		return j.createdEvent()
	}
	return j.events()[i-v]
}

// History returns j's events, oldest first. It may share its array with
// the stored job: the caller must not change it.
func (j *Job) History() []Event {
	evs := j.events()
	if j.creator == (Ident{}) {
		return evs
	}
	h := make([]Event, 0, len(evs)+1)
	return append(append(h, j.createdEvent()), evs...)
}

// createdEvent is the created event kept as j's creator.
func (j *Job) createdEvent() Event {
	return Event{Seq: 1, At: j.CreatedAt, Type: EventCreated, Actor: j.creator.String(), To: codeQueued}
}

// codeQueued is StateQueued's code.
var codeQueued = StateQueued.Code()

// foldsCreated reports whether e, as j's first event, is a created event
// j can keep as its creator.
func (j *Job) foldsCreated(e *Event) bool {
	return e.Seq == 1 && e.Type == EventCreated && e.At == j.CreatedAt && e.Actor != "" && e.From == 0 &&
		e.To == codeQueued && e.AttemptID == "" && e.WorkerID == "" && e.Text == ""
}

// setHistory makes evs j's history (a new job's, or one decoded), keeping
// a first event that folds as j's creator. j's CreatedAt must be set, and
// j must be the caller's own.
func (j *Job) setHistory(evs []Event) {
	j.creator = Ident{}
	if len(evs) > 0 && j.foldsCreated(&evs[0]) {
		j.creator = IdentOf(evs[0].Actor)
		evs = evs[1:]
		if len(evs) == 0 {
			evs = nil
		}
	}
	j.setEvents(evs)
}

// setEvents makes evs the events after j's creator; j must be the
// caller's own.
func (j *Job) setEvents(evs []Event) {
	if !j.hasTrail() && len(evs) == 0 {
		return
	}
	j.openTrail().history = evs
	if len(j.trail.attempts) == 0 && len(evs) == 0 {
		j.trail = nil
	}
}

// adoptHistory makes evs j's history as setHistory does, in an array of
// its own sized exactly when evs lies in a scratch array or its folded
// first event would pin a slot of it. j's CreatedAt must be set.
func (j *Job) adoptHistory(evs []Event) {
	full := len(evs)
	j.setHistory(evs)
	if h := j.events(); len(h) > 0 && len(h) < full {
		j.setEvents(append(make([]Event, 0, len(h)), h...))
	}
}

// jobV1 is a job as a version 1 snapshot holds it, in msgpack: the job's
// exported fields and its whole history.
type jobV1 struct {
	Job
	AttemptLog []Attempt
	History    []Event
}

// lastEvent is the last event of j's history; j must have one after its
// created event (the caller added it, on its own copy of the job).
func (j *Job) lastEvent() *Event { h := j.trail.history; return &h[len(h)-1] }

// setCreated starts a new job's history with its created event e.
func (j *Job) setCreated(e Event) {
	if j.foldsCreated(&e) {
		j.creator = IdentOf(e.Actor)
		j.setEvents(nil)
		return
	}
	j.creator = Ident{}
	j.setEvents([]Event{e})
}
