// Package iptables is the API Kubernetes 1.38 uses (every operation takes a context; Restore takes whole
// iptables-restore input; New and NewBestEffort take a mode), on Kubernetes 1.37's in-tree runner.
//
// Both modes run the iptables binaries found on PATH, as 1.37's kubelet and kube-proxy did: the node image built
// here has one iptables (Debian's alternatives), so there is no legacy/nft choice to detect.
package iptables

import (
	"bytes"
	"context"
	"time"

	"k8s.io/utils/set"

	intree "sigs.k8s.io/iptables-wrappers/internal/intree"
)

type (
	Chain        = intree.Chain
	Table        = intree.Table
	Protocol     = intree.Protocol
	RulePosition = intree.RulePosition
	ParseError   = intree.ParseError
	LineData     = intree.LineData
)

const (
	Prepend = intree.Prepend
	Append  = intree.Append

	ProtocolIPv4 = intree.ProtocolIPv4
	ProtocolIPv6 = intree.ProtocolIPv6

	TableNAT    = intree.TableNAT
	TableFilter = intree.TableFilter
	TableMangle = intree.TableMangle

	ChainPostrouting = intree.ChainPostrouting
	ChainPrerouting  = intree.ChainPrerouting
	ChainOutput      = intree.ChainOutput
	ChainInput       = intree.ChainInput
	ChainForward     = intree.ChainForward
)

// Mode says how a client chooses between iptables-legacy and iptables-nft.
type Mode int

const (
	// DetectHostMode: the mode the host's rules use.
	DetectHostMode Mode = iota
	// UseInstalledMode: the iptables binary as installed.
	UseInstalledMode
)

// Interface is 1.38's iptables client.
type Interface interface {
	EnsureChain(ctx context.Context, table Table, chain Chain) (bool, error)
	FlushChain(ctx context.Context, table Table, chain Chain) error
	DeleteChain(ctx context.Context, table Table, chain Chain) error
	ChainExists(ctx context.Context, table Table, chain Chain) (bool, error)
	EnsureRule(ctx context.Context, position RulePosition, table Table, chain Chain, args ...string) (bool, error)
	DeleteRule(ctx context.Context, table Table, chain Chain, args ...string) error
	IsIPv6() bool
	Protocol() Protocol
	SaveInto(ctx context.Context, table Table, buffer *bytes.Buffer) error
	// Restore applies iptables-restore input that names its tables (*nat ... COMMIT), keeping the other chains
	// and the counters.
	Restore(ctx context.Context, data []byte) error
	Monitor(ctx context.Context, canary Chain, tables []Table, reloadFunc func(), interval time.Duration)
	Present() error
}

type client struct{ in intree.Interface }

// New returns a client of one protocol, or the error that iptables is not usable here.
func New(_ context.Context, protocol Protocol, _ Mode) (Interface, error) {
	c := client{intree.New(protocol)}
	if err := c.in.Present(); err != nil {
		return nil, err
	}
	return c, nil
}

// NewBestEffort returns a client for each protocol whose iptables works here.
func NewBestEffort(_ context.Context, _ Mode) map[Protocol]Interface {
	out := map[Protocol]Interface{}
	for _, in := range intree.NewBestEffort() {
		out[in.Protocol()] = client{in}
	}
	return out
}

func (c client) EnsureChain(_ context.Context, table Table, chain Chain) (bool, error) {
	return c.in.EnsureChain(table, chain)
}

func (c client) FlushChain(_ context.Context, table Table, chain Chain) error {
	return c.in.FlushChain(table, chain)
}

func (c client) DeleteChain(_ context.Context, table Table, chain Chain) error {
	return c.in.DeleteChain(table, chain)
}

func (c client) ChainExists(_ context.Context, table Table, chain Chain) (bool, error) {
	return c.in.ChainExists(table, chain)
}

func (c client) EnsureRule(_ context.Context, position RulePosition, table Table, chain Chain, args ...string) (bool, error) {
	return c.in.EnsureRule(position, table, chain, args...)
}

func (c client) DeleteRule(_ context.Context, table Table, chain Chain, args ...string) error {
	return c.in.DeleteRule(table, chain, args...)
}

func (c client) IsIPv6() bool { return c.in.IsIPv6() }

func (c client) Protocol() Protocol { return c.in.Protocol() }

func (c client) SaveInto(_ context.Context, table Table, buffer *bytes.Buffer) error {
	return c.in.SaveInto(table, buffer)
}

func (c client) Restore(_ context.Context, data []byte) error {
	return c.in.RestoreAll(data, intree.NoFlushTables, intree.RestoreCounters)
}

func (c client) Monitor(ctx context.Context, canary Chain, tables []Table, reloadFunc func(), interval time.Duration) {
	c.in.Monitor(canary, tables, reloadFunc, interval, ctx.Done())
}

func (c client) Present() error { return c.in.Present() }

// IsNotFoundError says whether err means that a chain or rule does not exist.
func IsNotFoundError(err error) bool { return intree.IsNotFoundError(err) }

// MakeChainLine returns the iptables-save line that declares chain.
func MakeChainLine(chain Chain) string { return intree.MakeChainLine(chain) }

// GetChainsFromTable returns the chains an iptables-save of one table declares.
func GetChainsFromTable(save []byte) set.Set[Chain] {
	return set.New(intree.GetChainsFromTable(save).UnsortedList()...)
}

// ExtractLines returns count lines around line of iptables-restore input, for an error message.
func ExtractLines(lines []byte, line, count int) []LineData {
	return intree.ExtractLines(lines, line, count)
}
