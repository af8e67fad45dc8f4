package fetch

import (
	"net/netip"
)

// blocked is one address range outprint never connects to, with the reason
// named in the error so that an operator reading a log sees why.
type blocked struct {
	prefix netip.Prefix
	why    string
}

// metadata are the cloud metadata endpoints. They fall inside link-local and
// unique-local ranges that are refused anyway; they are listed first so that
// the error names them, because an attempt to reach them is the classic SSRF.
var metadata = []blocked{
	{netip.MustParsePrefix("169.254.169.254/32"), "cloud metadata"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "cloud metadata"},
}

// forbidden lists every range that is not a public unicast address: a server
// on such an address belongs to our own network (or to nobody), and a
// document must never make outprint talk to it.
var forbidden = []blocked{
	// IPv4.
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared address space (CGNAT)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	// IPv6. IPv4-mapped addresses (::ffff:0:0/96) are unmapped before the
	// check, so ::ffff:127.0.0.1 is refused as loopback.
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible (deprecated)"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	{netip.MustParsePrefix("2001::/32"), "Teredo"},
	{netip.MustParsePrefix("fc00::/7"), "unique-local"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local (deprecated)"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// Translation prefixes carry an IPv4 address inside an IPv6 one; the
// embedded address is checked like any IPv4 address, because a gateway on
// the way would deliver the packet to it.
var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// Forbidden reports whether outprint refuses to connect to ip, and why. It
// is exported so that other packages and operators' tools agree with the
// dial guard on what counts as internal.
func Forbidden(ip netip.Addr) (bool, string) {
	if !ip.IsValid() {
		return true, "invalid"
	}
	ip = ip.Unmap().WithZone("")
	for _, list := range [][]blocked{metadata, forbidden} {
		for _, b := range list {
			if b.prefix.Contains(ip) {
				return true, b.why
			}
		}
	}
	switch {
	case nat64.Contains(ip):
		b := ip.As16()
		if bad, why := Forbidden(netip.AddrFrom4([4]byte(b[12:16]))); bad {
			return true, "NAT64 of " + why
		}
	case sixToFour.Contains(ip):
		b := ip.As16()
		if bad, why := Forbidden(netip.AddrFrom4([4]byte(b[2:6]))); bad {
			return true, "6to4 of " + why
		}
	}
	return false, ""
}
