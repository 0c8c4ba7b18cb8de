package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// newTestBinTransport is a transport on 127.0.0.1 that dials every peer
// with the binary protocol (binary) or with msgpack.
func newTestBinTransport(t testing.TB, binary bool) *binTransport {
	t.Helper()
	sl, err := newTCPStreamLayer("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := newBinTransport(sl, raftMaxPool, 2*time.Second, !binary, hclog.NewNullLogger())
	tr.setPeerBinary(func(raft.ServerID, raft.ServerAddress) bool { return true })
	t.Cleanup(func() { tr.Close() })
	return tr
}

// serveRPCs answers every RPC on c with the response of its type from
// binResponses, after checking (binary) that it arrived as sent.
func serveRPCs(t *testing.T, c <-chan raft.RPC, sent func() interface{}, exact bool, handlerErr error) {
	resps := map[reflect.Type]interface{}{}
	reqs := binRequests()
	for i, r := range []int{0, 2, 3, 4, 5} {
		resps[reflect.TypeOf(reqs[r])] = binResponses()[i]
	}
	for rpc := range c {
		if want := sent(); exact && !reflect.DeepEqual(rpc.Command, want) {
			t.Errorf("received %+v, sent %+v", rpc.Command, want)
		}
		if rpc.Reader != nil {
			b, _ := io.ReadAll(rpc.Reader)
			if !bytes.Equal(b, snapshotBytes) {
				t.Errorf("snapshot data: %d bytes, want %d", len(b), len(snapshotBytes))
			}
		}
		rpc.Respond(resps[reflect.TypeOf(rpc.Command)], handlerErr)
	}
}

var snapshotBytes = bytes.Repeat([]byte("snapshot"), 40000)

// Every RPC raft makes arrives as sent and its answer comes back as
// given, error included, whichever protocol the client dials with; the
// pooled connections are reused (binary: one dial for all of them).
func TestBinTransportRPCs(t *testing.T) {
	for _, binary := range []bool{true, false} {
		t.Run(fmt.Sprintf("binary=%v", binary), func(t *testing.T) {
			a, b := newTestBinTransport(t, binary), newTestBinTransport(t, binary)
			var mu sync.Mutex
			var cur interface{}
			sent := func() interface{} { mu.Lock(); defer mu.Unlock(); return cur }
			go serveRPCs(t, b.Consumer(), sent, binary, nil)
			reqs := binRequests()
			resps := binResponses()
			check := func(i int, resp, want interface{}, err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%T: %v", reqs[i], err)
				}
				if !reflect.DeepEqual(resp, want) {
					t.Fatalf("%T: answer %+v, want %+v", reqs[i], resp, want)
				}
			}
			target := b.LocalAddr()
			for round := 0; round < 3; round++ {
				for i, req := range reqs {
					mu.Lock()
					cur = req
					mu.Unlock()
					switch r := req.(type) {
					case *raft.AppendEntriesRequest:
						var resp raft.AppendEntriesResponse
						check(i, &resp, resps[0], a.AppendEntries("b", target, r, &resp))
					case *raft.RequestVoteRequest:
						var resp raft.RequestVoteResponse
						check(i, &resp, resps[1], a.RequestVote("b", target, r, &resp))
					case *raft.RequestPreVoteRequest:
						var resp raft.RequestPreVoteResponse
						check(i, &resp, resps[2], a.RequestPreVote("b", target, r, &resp))
					case *raft.InstallSnapshotRequest:
						r2 := *r
						r2.Size = int64(len(snapshotBytes))
						mu.Lock()
						cur = &r2
						mu.Unlock()
						var resp raft.InstallSnapshotResponse
						check(i, &resp, resps[3], a.InstallSnapshot("b", target, &r2, &resp, bytes.NewReader(snapshotBytes)))
					case *raft.TimeoutNowRequest:
						var resp raft.TimeoutNowResponse
						check(i, &resp, resps[4], a.TimeoutNow("b", target, r, &resp))
					}
				}
			}
			// InstallSnapshot's connections are not reused: one per round,
			// plus one pooled connection for the rest.
			if got, want := a.dialedBinary.Load(), map[bool]uint64{true: 4, false: 0}[binary]; got != want {
				t.Errorf("binary connections dialled: %d, want %d", got, want)
			}
			if got := b.servedBinary.Load() > 0; got != binary {
				t.Errorf("binary connections served: %v", got)
			}
		})
	}
}

// An error raft's handler returns reaches the caller as an error with its
// text, and the connection stays usable.
func TestBinTransportHandlerError(t *testing.T) {
	a, b := newTestBinTransport(t, true), newTestBinTransport(t, true)
	go serveRPCs(t, b.Consumer(), func() interface{} { return nil }, false, errors.New("no leader here"))
	for i := 0; i < 2; i++ {
		var resp raft.RequestVoteResponse
		err := a.RequestVote("b", b.LocalAddr(), binRequests()[2].(*raft.RequestVoteRequest), &resp)
		if err == nil || err.Error() != "no leader here" {
			t.Fatalf("error %v", err)
		}
	}
	if n := a.dialedBinary.Load(); n != 1 {
		t.Fatalf("%d connections dialled, want 1", n)
	}
}

// Pipelined AppendEntries come back in order, each with its own answer.
func TestBinTransportPipeline(t *testing.T) {
	a, b := newTestBinTransport(t, true), newTestBinTransport(t, true)
	go func() {
		for rpc := range b.Consumer() {
			req := rpc.Command.(*raft.AppendEntriesRequest)
			rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term, LastLog: req.Entries[len(req.Entries)-1].Index, Success: true}, nil)
		}
	}()
	p, err := a.AppendEntriesPipeline("b", b.LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const n = 50
	go func() {
		for i := 1; i <= n; i++ {
			req := &raft.AppendEntriesRequest{Term: 3, Entries: []*raft.Log{{Index: uint64(i), Term: 3, Data: []byte("x")}}}
			if _, err := p.AppendEntries(req, &raft.AppendEntriesResponse{}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := 1; i <= n; i++ {
		select {
		case f := <-p.Consumer():
			if err := f.Error(); err != nil {
				t.Fatal(err)
			}
			if f.Response().LastLog != uint64(i) || f.Request().Entries[0].Index != uint64(i) || !f.Response().Success {
				t.Fatalf("future %d: request %d, answer %+v", i, f.Request().Entries[0].Index, f.Response())
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no answer %d", i)
		}
	}
	// A closed pipeline refuses more.
	p.Close()
	if _, err := p.AppendEntries(&raft.AppendEntriesRequest{Term: 3}, &raft.AppendEntriesResponse{}); err == nil {
		t.Fatal("closed pipeline sent")
	}
}

// A heartbeat goes to the heartbeat handler when one is set (raft's fast
// path, which guardTransport refuses), else to the consumer.
func TestBinTransportHeartbeat(t *testing.T) {
	a, b := newTestBinTransport(t, true), newTestBinTransport(t, true)
	hb := binRequests()[1].(*raft.AppendEntriesRequest)
	got := make(chan raft.RPC, 1)
	b.SetHeartbeatHandler(func(rpc raft.RPC) {
		got <- rpc
		rpc.Respond(&raft.AppendEntriesResponse{Term: 7, Success: true}, nil)
	})
	var resp raft.AppendEntriesResponse
	if err := a.AppendEntries("b", b.LocalAddr(), hb, &resp); err != nil || !resp.Success {
		t.Fatal(err, resp)
	}
	if rpc := <-got; !reflect.DeepEqual(rpc.Command, hb) {
		t.Fatalf("handler got %+v", rpc.Command)
	}
	b.SetHeartbeatHandler(nil)
	go func() {
		rpc := <-b.Consumer()
		rpc.Respond(&raft.AppendEntriesResponse{Term: 8}, nil)
	}()
	if err := a.AppendEntries("b", b.LocalAddr(), hb, &resp); err != nil || resp.Term != 8 {
		t.Fatal(err, resp)
	}
}

// A node of an older build (a plain NetworkTransport) and this transport
// talk msgpack both ways; a binary dial to the old node fails the RPC
// and delivers nothing to its raft.
func TestBinTransportWithOldNode(t *testing.T) {
	old, err := raft.NewTCPTransportWithLogger("127.0.0.1:0", nil, 2, 2*time.Second, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	nw := newTestBinTransport(t, false)
	delivered := make(chan interface{}, 10)
	answer := func(c <-chan raft.RPC) {
		for rpc := range c {
			delivered <- rpc.Command
			rpc.Respond(&raft.AppendEntriesResponse{Term: 5, Success: true}, nil)
		}
	}
	go answer(old.Consumer())
	go answer(nw.Consumer())
	req := &raft.AppendEntriesRequest{Term: 5, Entries: []*raft.Log{{Index: 1, Term: 5, Data: []byte("a")}}}
	var resp raft.AppendEntriesResponse
	if err := old.AppendEntries("new", nw.LocalAddr(), req, &resp); err != nil || !resp.Success {
		t.Fatalf("old to new: %v %+v", err, resp)
	}
	if err := nw.AppendEntries("old", old.LocalAddr(), req, &resp); err != nil || !resp.Success {
		t.Fatalf("new to old (msgpack): %v %+v", err, resp)
	}
	if nw.servedMsgpack.Load() != 1 {
		t.Fatalf("msgpack connections served: %d", nw.servedMsgpack.Load())
	}
	<-delivered
	<-delivered
	// A wrong guess: the old node's gossip said binary.
	wrong := newTestBinTransport(t, true)
	resp = raft.AppendEntriesResponse{}
	if err := wrong.AppendEntries("old", old.LocalAddr(), req, &resp); err == nil {
		t.Fatalf("a binary dial to an old node succeeded: %+v", resp)
	}
	p, err := wrong.AppendEntriesPipeline("old", old.LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendEntries(req, &raft.AppendEntriesResponse{}); err == nil {
		select {
		case f := <-p.Consumer():
			if f.Error() == nil {
				t.Fatal("a pipelined binary AppendEntries to an old node succeeded")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no answer from the pipeline")
		}
	}
	p.Close()
	select {
	case c := <-delivered:
		t.Fatalf("the old node's raft got %+v from a binary dial", c)
	default:
	}
}

// Frames that do not decode close the connection and reach no raft.
func TestBinTransportRefusesBadFrames(t *testing.T) {
	b := newTestBinTransport(t, true)
	go func() {
		for rpc := range b.Consumer() {
			t.Errorf("delivered %+v", rpc.Command)
			rpc.Respond(nil, errors.New("no"))
		}
	}()
	var ae binEnc
	encodeRequest(&ae, binRequests()[0])
	for name, frame := range map[string][]byte{
		"unknown version":   {binMagic, 9, binAppendEntries, 0},
		"unknown rpc type":  {binMagic, binVersion, 7, 0},
		"truncated payload": append([]byte{binMagic, binVersion, binAppendEntries, byte(len(ae.b) - 1)}, ae.b[:len(ae.b)/2]...),
		"trailing byte":     append([]byte{binMagic, binVersion, binAppendEntries, 0x80 | byte(len(ae.b)+1), byte((len(ae.b) + 1) >> 7)}, append(ae.b, 0)...),
	} {
		c, err := net.Dial("tcp", string(b.LocalAddr()))
		if err != nil {
			t.Fatal(err)
		}
		c.Write(frame)
		if name == "truncated payload" {
			c.(*net.TCPConn).CloseWrite()
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := c.Read(make([]byte, 1))
		if n != 0 || err == nil || isTimeout(err) {
			t.Errorf("%s: read %d, %v; want the connection closed", name, n, err)
		}
		c.Close()
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// A msgpack pipeline is refused once the peer is known to serve the
// binary protocol, so raft reopens it as a binary one; after Close, RPCs
// fail and nothing more is accepted.
func TestBinTransportUpgradeAndClose(t *testing.T) {
	a, b := newTestBinTransport(t, true), newTestBinTransport(t, true)
	go func() {
		for rpc := range b.Consumer() {
			rpc.Respond(&raft.AppendEntriesResponse{Term: 1, Success: true}, nil)
		}
	}()
	var knows sync.Mutex
	binary := false
	a.setPeerBinary(func(raft.ServerID, raft.ServerAddress) bool { knows.Lock(); defer knows.Unlock(); return binary })
	p, err := a.AppendEntriesPipeline("b", b.LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendEntries(&raft.AppendEntriesRequest{Term: 1}, &raft.AppendEntriesResponse{}); err != nil {
		t.Fatal(err)
	}
	knows.Lock()
	binary = true
	knows.Unlock()
	if _, err := p.AppendEntries(&raft.AppendEntriesRequest{Term: 1}, &raft.AppendEntriesResponse{}); !errors.Is(err, errBinUpgrade) {
		t.Fatalf("msgpack pipeline after the upgrade: %v", err)
	}
	p.Close()
	p, err = a.AppendEntriesPipeline("b", b.LocalAddr())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.(*binPipeline); !ok {
		t.Fatalf("reopened pipeline is a %T", p)
	}
	p.Close()

	b.Close()
	var resp raft.AppendEntriesResponse
	if err := a.AppendEntries("b", b.LocalAddr(), &raft.AppendEntriesRequest{Term: 1}, &resp); err == nil {
		t.Fatal("an RPC to a closed transport succeeded")
	}
	a.Close()
	if err := a.AppendEntries("b", b.LocalAddr(), &raft.AppendEntriesRequest{Term: 1}, &resp); err == nil {
		t.Fatal("a closed transport sent an RPC")
	}
}

// A cluster mid-upgrade: n0 and n1 on this build, n2 on an older one (a
// plain NetworkTransport, no binary protocol gossiped), n3 on this build
// told to dial msgpack only. Every node replicates the same log, through
// a leader's death and a lagging node's catch-up by snapshot; the new
// nodes talk binary to the nodes that serve it and msgpack to the rest.
func TestMixedTransportCluster(t *testing.T) {
	ctx := context.Background()
	var cfgs []Config
	for i := 0; i < 4; i++ {
		c := newTCPConfig(t, fmt.Sprintf("n%d", i))
		c.SnapshotInterval = 50 * time.Millisecond
		c.SnapshotThreshold = 4
		c.TrailingLogs = 2
		cfgs = append(cfgs, c)
	}
	cfgs[0].Bootstrap = true
	cfgs[3].RaftMsgpack = true
	old, err := raft.NewTCPTransportWithLogger(cfgs[2].RaftAddr, nil, 3, 10*time.Second, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	cfgs[2].Transport = old
	var nodes []*tcpNode
	for _, c := range cfgs {
		nodes = append(nodes, startTCP(t, c))
	}
	leader := waitLeader(t, []*Node{nodes[0].Node})
	for _, n := range nodes[1:] {
		m := Member{ID: n.cfg.NodeID, RaftAddr: n.cfg.RaftAddr, HTTPAddr: n.cfg.HTTPAddr, GossipAddr: n.cfg.GossipAddr}
		if err := leader.AddVoter(ctx, m); err != nil {
			t.Fatalf("add %s: %v", m.ID, err)
		}
	}
	all := func() []*Node {
		var ns []*Node
		for _, n := range nodes {
			if n != nil {
				ns = append(ns, n.Node)
			}
		}
		return ns
	}
	leader = waitLeader(t, all())
	var want []string
	apply := func(l *Node) {
		cmd := fmt.Sprintf("c%d", len(want))
		applyOK(t, l, cmd)
		want = append(want, cmd)
	}
	// Once gossip has told n0 who serves what, its AppendEntries reach n1
	// and n3 in binary.
	waitFor(t, 20*time.Second, "binary AppendEntries from the leader to n1 and n3", func() bool {
		apply(leader)
		return nodes[1].bin.servedBinary.Load() > 0 && nodes[3].bin.servedBinary.Load() > 0
	})
	for _, n := range nodes {
		waitFSM(t, n.fsm, want)
	}
	if nodes[3].bin.dialedBinary.Load() != 0 {
		t.Fatal("n3, msgpack only, dialled a binary connection")
	}

	// The leader dies; the others elect one and go on; n0 comes back
	// behind their snapshots and is brought up to date.
	nodes[0].Shutdown()
	restarted := nodes[0].cfg
	nodes[0] = nil
	leader = waitLeader(t, all())
	for i := 0; i < 20; i++ {
		apply(leader)
	}
	nodes[0] = startTCP(t, restarted)
	for _, n := range nodes {
		waitFSM(t, n.fsm, want)
	}
	for i := 0; i < 5; i++ {
		apply(waitLeader(t, all()))
	}
	for _, n := range nodes {
		waitFSM(t, n.fsm, want)
	}
}

// Concurrent RPCs to one peer each get their own connection and their own
// answer; no more than maxPool connections stay pooled afterwards.
func TestBinTransportPooledConns(t *testing.T) {
	a, b := newTestBinTransport(t, true), newTestBinTransport(t, true)
	go func() {
		for rpc := range b.Consumer() {
			req := rpc.Command.(*raft.AppendEntriesRequest)
			rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term, LastLog: req.PrevLogEntry, Success: true}, nil)
		}
	}()
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for k := 0; k < 20; k++ {
				var resp raft.AppendEntriesResponse
				req := &raft.AppendEntriesRequest{Term: 2, PrevLogEntry: uint64(i*100 + k)}
				if err := a.AppendEntries("b", b.LocalAddr(), req, &resp); err != nil || resp.LastLog != req.PrevLogEntry {
					t.Errorf("rpc %d/%d: %v, answer %+v", i, k, err, resp)
					return
				}
			}
		}(i)
	}
	wg.Wait()
	a.poolMu.Lock()
	pooled := len(a.pool[b.LocalAddr()])
	a.poolMu.Unlock()
	if pooled < 1 || pooled > raftMaxPool {
		t.Fatalf("%d connections pooled, want 1 to %d", pooled, raftMaxPool)
	}
}
