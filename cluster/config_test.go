package cluster

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	tests := []struct {
		name   string
		change func(*Config)
		want   string // substring of the error; "" for valid
	}{
		{"port 0", func(c *Config) { c.BindAddr = "127.0.0.1:0" }, ""},
		{"all interfaces", func(c *Config) { c.BindAddr = ":7946" }, ""},
		{"ipv6", func(c *Config) { c.BindAddr = "[::1]:7946" }, ""},
		{"advertise", func(c *Config) { c.AdvertiseAddr = "10.1.2.3:7946" }, ""},
		{"keys", func(c *Config) { c.GossipKey = make([]byte, 24) }, ""},
		{"tcp", func(c *Config) { c.SyncTransport = TransportTCP }, ""},
		{"no name", func(c *Config) { c.NodeName = "" }, "NodeName must have 1 to 512 bytes"},
		{"long name", func(c *Config) { c.NodeName = strings.Repeat("n", 513) }, "NodeName"},
		{"bind without port", func(c *Config) { c.BindAddr = "127.0.0.1" }, "BindAddr"},
		{"bind host name", func(c *Config) { c.BindAddr = "localhost:7946" }, "must be an IP address"},
		{"bind bad port", func(c *Config) { c.BindAddr = "127.0.0.1:99999" }, "port"},
		{"advertise host name", func(c *Config) { c.AdvertiseAddr = "example.com:7946" }, "AdvertiseAddr: host"},
		{"join without port", func(c *Config) { c.Join = []string{"10.0.0.1"} }, "Join address"},
		{"negative anti-entropy", func(c *Config) { c.AntiEntropyInterval = -time.Second }, "AntiEntropyInterval"},
		{"zero rejoin", func(c *Config) { c.RejoinInterval = 0 }, "RejoinInterval"},
		{"zero leave", func(c *Config) { c.LeaveTimeout = 0 }, "LeaveTimeout"},
		{"long label", func(c *Config) { c.Label = strings.Repeat("l", 256) }, "Label"},
		{"short key", func(c *Config) { c.GossipKey = make([]byte, 15) }, "GossipKey must have 16, 24 or 32 bytes"},
		{"quic", func(c *Config) { c.SyncTransport = "quic" }, "SyncTransport"},
		{"no queue", func(c *Config) { c.QueueLength = 0 }, "QueueLength"},
		{"jumbo datagrams", func(c *Config) { c.DatagramBudget = 8900 }, ""},
		{"datagrams as the bind address allows", func(c *Config) { c.DatagramBudget = 0 }, ""},
		{"least datagrams", func(c *Config) { c.DatagramBudget = MinDatagramBudget }, ""},
		{"largest datagrams", func(c *Config) { c.DatagramBudget = MaxDatagramBudget }, ""},
		{"datagrams too small", func(c *Config) { c.DatagramBudget = MinDatagramBudget - 1 }, "DatagramBudget must be 0 (the default for BindAddr) or between 1200 and 60000 bytes"},
		{"datagrams too large", func(c *Config) { c.DatagramBudget = MaxDatagramBudget + 1 }, "DatagramBudget"},
		{"negative spread", func(c *Config) { c.SendSpread = -0.1 }, "SendSpread"},
		{"spread past the grace", func(c *Config) { c.SendSpread = 0.3 }, "SendSpread"},
		{"no clock offset check", func(c *Config) { c.MaxClockOffset = 0 }, ""},
		{"clock offset under the stale age", func(c *Config) { c.MaxClockOffset = 9 * time.Second }, ""},
		{"negative clock offset", func(c *Config) { c.MaxClockOffset = -time.Millisecond }, "MaxClockOffset must be at least 0"},
		{"clock offset at the stale age", func(c *Config) { c.MaxClockOffset = 10 * time.Second }, "MaxClockOffset"},
		{"every problem: timing", func(c *Config) { c.MaxClockOffset, c.QueueLength = -1, 0 }, "MaxClockOffset must be at least 0"},
		{"every problem: queue", func(c *Config) { c.MaxClockOffset, c.QueueLength = -1, 0 }, "QueueLength"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.change(&c)
			err := c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("valid config rejected: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("err %v, want ErrInvalidConfig mentioning %q", err, tc.want)
			}
		})
	}
}

func TestDefaultNodeName(t *testing.T) {
	host, _ := os.Hostname()
	name, err := DefaultNodeName("0.0.0.0:7951")
	if err != nil || name != host+"-7951" {
		t.Fatalf("DefaultNodeName: %q, %v; want %q", name, err, host+"-7951")
	}
	if _, err := DefaultNodeName("no-port"); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("address without port: err %v", err)
	}
}

// Sync messages must fit one datagram of DatagramBudget bytes with
// memberlist's framing, whatever the label and encryption add, and be a
// size the Engine takes, over the budget's whole range.
func TestDatagramBudget(t *testing.T) {
	for _, tc := range []struct {
		budget int
		label  string
		key    []byte
		want   int
	}{
		{DefaultDatagramBudget, "", nil, 1394},
		{DefaultDatagramBudget, "prod", nil, 1388},
		{DefaultDatagramBudget, "", make([]byte, 32), 1365},
		{DefaultDatagramBudget, strings.Repeat("l", 255), make([]byte, 16), 1108},
		{8900, "", nil, 8894},
		{MinDatagramBudget, strings.Repeat("l", 255), make([]byte, 16), 908},
		{MaxDatagramBudget, "", nil, 59994},
		{0, "", nil, 1394}, // not resolved: the default's
	} {
		c := DefaultConfig()
		c.DatagramBudget, c.Label, c.GossipKey = tc.budget, tc.label, tc.key
		if got := c.datagramMessageBytes(); got != tc.want {
			t.Errorf("budget %d, label %d bytes, key %d bytes: %d, want %d", tc.budget, len(tc.label), len(tc.key), got, tc.want)
		}
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		if err := c.engineConfig().Validate(); err != nil {
			t.Errorf("the datagram size is not a valid Engine size: %v", err)
		}
	}
}

// TestCheckGossipKey is the one check of a gossip key's size, which the
// config, the keyring and limiterd's flags share.
func TestCheckGossipKey(t *testing.T) {
	for _, tc := range []struct {
		size int
		ok   bool
	}{{0, false}, {15, false}, {16, true}, {17, false}, {24, true}, {31, false}, {32, true}, {33, false}, {64, false}} {
		err := CheckGossipKey("the key", make([]byte, tc.size))
		if tc.ok != (err == nil) {
			t.Errorf("%d bytes: %v, want ok %v", tc.size, err, tc.ok)
		}
		if err != nil && (!errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), fmt.Sprintf("the key must have 16, 24 or 32 bytes (AES-128, -192, -256), got %d", tc.size))) {
			t.Errorf("%d bytes: %v, want ErrInvalidConfig naming the key and its size", tc.size, err)
		}
	}
}

// A budget of 0 follows the bind address: 1,400 off loopback whatever
// the interface, the loopback's MTU less the headers on it, within the
// budget's range, and no more than macOS sends elsewhere than Linux.
func TestDatagramBudgetOfBindAddress(t *testing.T) {
	for _, tc := range []struct {
		host string
		mtu  int
		goos string
		want int
	}{
		{"0.0.0.0", 65536, "linux", DefaultDatagramBudget},
		{"10.0.0.5", 9001, "linux", DefaultDatagramBudget},
		{"", 65536, "linux", DefaultDatagramBudget},
		{"127.0.0.1", 65536, "linux", MaxDatagramBudget},
		{"127.0.0.2", 65536, "linux", MaxDatagramBudget},
		{"::1", 65536, "linux", MaxDatagramBudget},
		{"127.0.0.1", 16384, "linux", 16384 - 28},
		{"::1", 16384, "linux", 16384 - 48},
		{"127.0.0.1", 16384, "darwin", 9216 - 48},
		{"127.0.0.1", 1500, "linux", 1472},
		{"127.0.0.1", 1400, "linux", DefaultDatagramBudget}, // fragments stay on the host
		{"127.0.0.1", 0, "linux", DefaultDatagramBudget},    // no loopback found
	} {
		got := datagramBudget(tc.host, tc.mtu, tc.goos)
		if got != tc.want {
			t.Errorf("%q, MTU %d, %s: %d, want %d", tc.host, tc.mtu, tc.goos, got, tc.want)
		}
		c := DefaultConfig()
		c.DatagramBudget = got
		if err := c.Validate(); err != nil {
			t.Errorf("%q, MTU %d, %s: %v", tc.host, tc.mtu, tc.goos, err)
		}
	}
	c := DefaultConfig()
	c.DatagramBudget = 8900
	if c.resolveBudget() || c.DatagramBudget != 8900 {
		t.Errorf("a budget set was changed to %d", c.DatagramBudget)
	}
}
