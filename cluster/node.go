package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

// Node is one member of a Spine cluster: it owns the raft instance, its
// stores, the transport and memberlist. All methods are safe for concurrent
// use.
type Node struct {
	cfg     Config
	logger  hclog.Logger
	raft    *raft.Raft
	stores  *stores
	trans   raft.Transport
	bin     *binTransport          // the transport New made (nil with Config.Transport)
	ml      *memberlist.Memberlist // nil if DisableGossip
	mlPtr   atomic.Pointer[memberlist.Memberlist]
	tracker *applyTracker
	// proposer groups concurrent Applies into larger fsync'ed batches.
	proposer *proposer

	peersMu sync.Mutex
	peers   map[string]peerInfo // other nodes, by id

	peersDirty chan struct{} // poke: rewrite peers.json
	gossipKick chan struct{} // poke: reconcile gossip now

	leaderMu     sync.Mutex
	leaderNotify chan struct{} // closed and replaced on every leader change

	hooksMu sync.Mutex
	hooks   []leaderHook
	session *leaderSession // non-nil while leader and ready
	ready   atomic.Bool

	// hasher is the FSM's state hash, if it keeps one (hashcheck.go).
	hasher         StateHasher
	hashMeta       atomic.Pointer[hashReport] // the latest hash gossiped
	hashChecks     atomic.Uint64
	hashMismatches atomic.Uint64

	// live is the gossiped last-seen time of gateways and workers
	// (liveness.go).
	live *liveness

	// lease is the leader's read lease (guardTransport records its
	// followers' answers).
	lease *readLease

	observerCh chan raft.Observation
	observer   *raft.Observer
	// leaderChanges counts the leader observations (metrics.go).
	leaderChanges atomic.Uint64
	// keys is the gossip keyring, nil without encryption (keyring.go).
	keys *keyring

	shutdownCh   chan struct{}
	shutdownOnce sync.Once
	shutdownErr  error
	wg           sync.WaitGroup // background loops
	hookWG       sync.WaitGroup // leader hook goroutines
}

// New opens (or creates) the node's stores under cfg.DataDir, starts raft and
// memberlist, bootstraps if asked and there is no existing state, and starts
// the join, gossip and leader loops. It refuses to start if the raft log store
// is damaged: a bolt raft.db failing its consistency check, or a WAL that
// cannot be opened (ErrCorruptStore).
func New(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Node{
		cfg:          cfg,
		logger:       cfg.Logger.Named("cluster"),
		tracker:      newApplyTracker(),
		peers:        map[string]peerInfo{},
		peersDirty:   make(chan struct{}, 1),
		gossipKick:   make(chan struct{}, 1),
		leaderNotify: make(chan struct{}),
		shutdownCh:   make(chan struct{}),
		live:         newLiveness(),
	}
	if h, ok := cfg.FSM.(StateHasher); ok {
		n.hasher = h
	}
	st, err := openStores(&n.cfg, n.logFailed)
	if err != nil {
		return nil, err
	}
	n.stores = st
	if cs, ok := st.snaps.(*checkedSnapshots); ok {
		// Until a snapshot is restored, raft opening another is a fall
		// back (snapstate.go).
		cs.whenRestored(func() bool { return n.tracker.applied.Load() != 0 })
	}
	fail := func(err error) (*Node, error) {
		if n.ml != nil {
			n.ml.Shutdown()
		}
		if n.raft != nil {
			n.raft.Shutdown().Error()
		} else if n.trans != nil {
			if c, ok := n.trans.(raft.WithClose); ok {
				c.Close()
			}
		}
		st.close()
		return nil, err
	}
	if n.cfg.DataDir != "" {
		kr, err := openKeyring(n.cfg.DataDir, n.cfg.GossipKey)
		if err != nil {
			return fail(fmt.Errorf("gossip keyring: %w", err))
		}
		n.keys = kr
		if kr != nil && kr.ignored {
			n.logger.Warn("the gossip key given at start is not in this node's keyring file, which wins; rotate keys with spine keyring",
				"file", kr.path, "key", KeyFingerprint(n.cfg.GossipKey))
		}
	} else if n.cfg.GossipKey != nil {
		n.keys = &keyring{ring: mustRing(n.cfg.GossipKey)}
	}

	hasState, err := raft.HasExistingState(st.logs, st.stable, st.snaps)
	if err != nil {
		return fail(fmt.Errorf("check raft state: %w", err))
	}

	n.trans = cfg.Transport
	if n.trans == nil {
		bt, err := n.newTransport()
		if err != nil {
			return fail(err)
		}
		n.trans, n.bin = bt, bt
		n.cfg.RaftAddr = string(bt.LocalAddr())
	}
	var bound func(uint64) uint64
	if st.overlap != nil {
		bound = st.overlap.commitBound
	}
	n.lease = newReadLease(n.cfg.LeaderLeaseTimeout)
	n.trans = guard(n.trans, bound, n.lease)

	if err := n.loadPeers(); err != nil {
		return fail(err)
	}

	// Entries already in the log were counted by this node's previous
	// process when it applied them: its figures count only new ones.
	if c, ok := cfg.FSM.(interface{ CountEventsAfter(uint64) }); ok {
		if last, err := st.logs.LastIndex(); err == nil {
			c.CountEventsAfter(last)
		}
	}
	rc := n.cfg.raftConfig()
	var durable func(uint64)
	if st.overlap != nil {
		durable = st.overlap.waitDurable
	}
	r, err := raft.NewRaft(rc, wrapFSM(cfg.FSM, n.tracker, durable), st.logs, st.stable,
		&trackedSnapshots{SnapshotStore: st.snaps, t: n.tracker}, n.trans)
	n.raft = r
	// The snapshots raft did not restore were checked meanwhile; a damaged
	// one refuses the start, as does the newest not restoring.
	if cs, ok := st.snaps.(*checkedSnapshots); ok {
		if cerr := cs.started(); cerr != nil {
			return fail(cerr)
		}
	}
	if err != nil {
		return fail(fmt.Errorf("start raft: %w", err))
	}
	if st.overlap != nil {
		st.overlap.setLeaderCheck(func() bool { return r.State() == raft.Leader })
	}
	n.proposer = newProposer(r, cfg.MaxInflightBatches, func() time.Duration { return n.cfg.ApplyTimeout })

	if cfg.Bootstrap && !hasState {
		bc := raft.Configuration{Servers: []raft.Server{{
			Suffrage: raft.Voter,
			ID:       raft.ServerID(cfg.NodeID),
			Address:  n.trans.LocalAddr(),
		}}}
		if err := r.BootstrapCluster(bc).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			return fail(fmt.Errorf("bootstrap: %w", err))
		}
		n.logger.Info("bootstrapped new cluster", "id", cfg.NodeID)
	} else if cfg.Bootstrap {
		n.logger.Info("existing raft state found; not bootstrapping")
	}

	n.observerCh = make(chan raft.Observation, 16)
	n.observer = raft.NewObserver(n.observerCh, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	r.RegisterObserver(n.observer)

	if !cfg.DisableGossip {
		if err := n.startMemberlist(); err != nil {
			return fail(err)
		}
	}

	n.wg.Add(3)
	go n.leaderLoop()
	go n.observeLoop()
	go n.peersLoop()
	poke(n.peersDirty)
	if n.ml != nil {
		var seeds []string
		if hasState || cfg.Bootstrap {
			seeds = cfg.Join // only for finding gossip peers
		}
		n.wg.Add(1)
		go n.gossipLoop(seeds)
		if n.hasher != nil {
			n.wg.Add(1)
			go n.hashLoop()
		}
	}
	if len(cfg.Join) > 0 && !hasState && !cfg.Bootstrap {
		n.wg.Add(1)
		go n.joinLoop(cfg.Join)
	}
	n.logger.Info("node started", "id", cfg.NodeID, "raft", n.cfg.RaftAddr,
		"gossip", cfg.GossipAddr, "http", cfg.HTTPAddr, "existing_state", hasState)
	return n, nil
}

// ID returns this node's id.
func (n *Node) ID() string { return n.cfg.NodeID }

// self describes this node as a Member.
func (n *Node) self() Member {
	m := Member{ID: n.cfg.NodeID, RaftAddr: n.cfg.RaftAddr, HTTPAddr: n.cfg.HTTPAddr, GossipAddr: n.cfg.GossipAddr,
		GossipProof: n.joinProof()}
	if n.bin != nil {
		m.Transport = binVersion
	}
	return m
}

// Shutdown stops the node: it cancels leader hooks, leaves memberlist, shuts
// raft down and closes the stores. It is idempotent; later calls return the
// first call's error.
func (n *Node) Shutdown() error {
	n.shutdownOnce.Do(func() {
		n.logger.Info("shutting down")
		close(n.shutdownCh)
		var errs []error
		if n.ml != nil {
			if err := n.ml.Leave(time.Second); err != nil {
				n.logger.Debug("memberlist leave", "error", err)
			}
			if err := n.ml.Shutdown(); err != nil {
				errs = append(errs, fmt.Errorf("memberlist shutdown: %w", err))
			}
		}
		n.raft.DeregisterObserver(n.observer)
		if err := n.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("raft shutdown: %w", err))
		}
		n.wg.Wait()
		n.endSession()
		n.hookWG.Wait()
		if err := n.stores.close(); err != nil {
			errs = append(errs, fmt.Errorf("close raft store: %w", err))
		}
		n.notifyLeaderChange()
		n.shutdownErr = errors.Join(errs...)
	})
	return n.shutdownErr
}

// logFailed is called when the leader's overlapped log write fails (see
// overlapLog). raft has sent, and may have committed, entries this node's log
// does not hold, and cannot be told so; the node stops, as a database does
// when an fsync fails, and on restart rejoins from what its disk holds.
// Nothing it had not made durable was acknowledged to anyone.
func (n *Node) logFailed(err error) {
	n.logger.Error("raft log write failed; stopping the node", "error", err)
	panic(err)
}

func (n *Node) isShutdown() bool {
	select {
	case <-n.shutdownCh:
		return true
	default:
		return false
	}
}

// timeout returns the raft timeout for an operation under ctx: the time to
// ctx's deadline, capped at ApplyTimeout.
func (n *Node) timeout(ctx context.Context) time.Duration {
	t := n.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		if d := time.Until(dl); d < t {
			t = max(d, time.Millisecond)
		}
	}
	return t
}

// waitFuture waits for f or ctx, whichever comes first. errCtx reports that
// ctx ended first (the future is still pending).
func (n *Node) waitFuture(ctx context.Context, f raft.Future) (err error, ctxDone bool) {
	done := make(chan error, 1)
	go func() { done <- f.Error() }() // raft always resolves futures, on shutdown too
	select {
	case err := <-done:
		return err, false
	case <-ctx.Done():
		return ctx.Err(), true
	}
}

// Apply proposes cmd on this node, which must be the leader, and waits for it
// to be applied to the FSM. It returns the FSM's response and the entry's log
// index. Errors: ErrNotLeader if nothing was proposed; ErrOutcomeUnknown if
// the command was handed to raft but its fate is unknown (leadership lost,
// timeout, ctx done); ErrShutdown if the node is shut down.
func (n *Node) Apply(ctx context.Context, cmd []byte) (interface{}, uint64, error) {
	if n.isShutdown() {
		return nil, 0, ErrShutdown
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	if n.raft.State() != raft.Leader {
		return nil, 0, ErrNotLeader
	}
	select {
	case res := <-n.proposer.propose(cmd):
		if res.err != nil {
			return nil, 0, translateProposeErr(res.err)
		}
		return res.future.Response(), res.future.Index(), nil
	case <-ctx.Done():
		return nil, 0, fmt.Errorf("%w: %v", ErrOutcomeUnknown, ctx.Err())
	}
}

// IsLeader reports whether this node is the raft leader and has completed its
// post-election Barrier, so its FSM holds every committed entry.
func (n *Node) IsLeader() bool {
	return n.ready.Load() && n.raft.State() == raft.Leader
}

// Leader returns the current leader's id and advertised HTTP URL, "" if
// unknown. The URL comes from gossip metadata, falling back to peers.json and
// to what AddVoter or a join answer told this node.
func (n *Node) Leader() (id, httpAddr string) {
	_, lid := n.raft.LeaderWithID()
	id = string(lid)
	if id == "" {
		return "", ""
	}
	return id, n.httpAddrOf(id)
}

func (n *Node) httpAddrOf(id string) string {
	if id == n.cfg.NodeID {
		return n.cfg.HTTPAddr
	}
	if p, ok := n.peer(id); ok {
		return p.HTTPAddr
	}
	return ""
}

// LeaderCh returns a channel that is closed at the next change of leader,
// leadership readiness, or gossip membership (which can change the leader's
// known HTTP URL). Call it again after it fires to wait for the next change.
func (n *Node) LeaderCh() <-chan struct{} {
	n.leaderMu.Lock()
	defer n.leaderMu.Unlock()
	return n.leaderNotify
}

func (n *Node) notifyLeaderChange() {
	n.leaderMu.Lock()
	close(n.leaderNotify)
	n.leaderNotify = make(chan struct{})
	n.leaderMu.Unlock()
}

// observeLoop turns raft leader observations into LeaderCh notifications.
func (n *Node) observeLoop() {
	defer n.wg.Done()
	for {
		select {
		case <-n.shutdownCh:
			return
		case o := <-n.observerCh:
			n.leaderChanges.Add(1)
			if lo, ok := o.Data.(raft.LeaderObservation); ok {
				if lo.LeaderID == "" {
					n.logger.Warn("no leader", "term", n.raft.CurrentTerm())
				} else {
					n.logger.Info("leader changed", "leader", string(lo.LeaderID), "term", n.raft.CurrentTerm())
				}
			}
			n.notifyLeaderChange()
		}
	}
}

// configuration returns the current raft configuration.
func (n *Node) configuration() (raft.Configuration, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raft.Configuration{}, translateOpErr(err)
	}
	return f.Configuration(), nil
}
