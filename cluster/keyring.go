package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
)

// ErrNoKeyring is returned by SetGossipKeys on a node started without
// Config.GossipKeys: its encryption cannot be changed at run time.
var ErrNoKeyring = errors.New("cluster: node has no gossip keyring")

// CheckGossipKey returns nil for a key memberlist encrypts with: 16, 24
// or 32 bytes, for AES-128, -192 or -256. Otherwise it returns an error
// wrapping ErrInvalidConfig that says so of what (the key's name in the
// caller's terms: a field, a flag, a line of a file).
func CheckGossipKey(what string, key []byte) error {
	switch len(key) {
	case 16, 24, 32:
		return nil
	}
	return fmt.Errorf("%w: %s must have 16, 24 or 32 bytes (AES-128, -192, -256), got %d", ErrInvalidConfig, what, len(key))
}

// SetGossipKeys replaces the node's keyring while it runs: every key in
// keys decrypts, and keys[0] encrypts from now on. Rotating a key without
// downtime takes three steps, each applied on every node before the next
// (SECURITY.md): add the new key second, make it first, drop the old one.
// Counts are never lost meanwhile, because every node decrypts with both
// keys while any node may still encrypt with either.
func (n *Node) SetGossipKeys(keys [][]byte) error {
	if n.keyring == nil {
		return ErrNoKeyring
	}
	if len(keys) == 0 {
		return fmt.Errorf("%w: no key", ErrInvalidConfig)
	}
	for _, k := range keys {
		if err := CheckGossipKey("a gossip key", k); err != nil {
			return err
		}
	}
	for _, k := range keys {
		if err := n.keyring.AddKey(slices.Clone(k)); err != nil {
			return fmt.Errorf("cluster: gossip keys: %w", err)
		}
	}
	if err := n.keyring.UseKey(keys[0]); err != nil {
		return fmt.Errorf("cluster: gossip keys: %w", err)
	}
	for _, old := range n.keyring.GetKeys() {
		if !slices.ContainsFunc(keys, func(k []byte) bool { return bytes.Equal(k, old) }) {
			if err := n.keyring.RemoveKey(old); err != nil {
				return fmt.Errorf("cluster: gossip keys: %w", err)
			}
		}
	}
	n.log.Info("gossip keys installed", "keys", len(keys))
	return nil
}

func cloneKeys(keys [][]byte) [][]byte {
	out := make([][]byte, len(keys))
	for i, k := range keys {
		out[i] = slices.Clone(k)
	}
	return out
}
