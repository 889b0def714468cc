//! Ports for the servers a test starts as child processes (a private PostgreSQL, PgBouncer,
//! the example stack), which are told their port before they bind it.

/// A loopback port that is free now, for a server started later, chosen outside the
/// kernel's ephemeral range: ports in that range go to outgoing connections (the suite
/// opens many in parallel) and to other tests' `bind(…:0)`. One of them taking our port
/// between choosing it and the server's bind, or while a crash test has the server down,
/// fails the server's start with "Address already in use". Outside the range only another
/// explicit choice like this one can collide: a random pick among some 27,000 ports on
/// Linux's default range, and checked free. Falls back to an ephemeral port where the
/// range leaves no room.
pub fn free_port() -> u16 {
    use rand::seq::IndexedRandom;
    let (ephemeral_low, ephemeral_high) = ephemeral_range();
    let candidates = ports_outside(ephemeral_low, ephemeral_high);
    let mut random = rand::rng();
    // A hundred taken ports in a row would mean nearly all of them are: the fallback
    // below is then as good as any.
    for _ in 0..100 {
        let Some(&port) = candidates.choose(&mut random) else {
            break;
        };
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

/// The ports from [`FIRST_CHOSEN_PORT`] up that lie outside the ephemeral range
/// `low..=high`; none when the range covers them all (e.g. `1024 65535`).
fn ports_outside(low: u16, high: u16) -> Vec<u16> {
    let below = FIRST_CHOSEN_PORT..low;
    let above = high
        .checked_add(1)
        .into_iter()
        .flat_map(|start| start.max(FIRST_CHOSEN_PORT)..=u16::MAX);
    below.chain(above).collect()
}

/// Below this are the well-known and commonly configured ports (5432, 6432, 8080…).
const FIRST_CHOSEN_PORT: u16 = 10_000;

/// The kernel's ephemeral port range (`ip_local_port_range`); Linux's default where it
/// cannot be read.
fn ephemeral_range() -> (u16, u16) {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| {
            let mut bounds = text.split_whitespace().map(|bound| bound.parse().ok());
            Some((bounds.next()??, bounds.next()??))
        })
        .unwrap_or((32_768, 60_999))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel hands ports of its ephemeral range to outgoing connections, and the
    /// suite opens many of them in parallel. One that takes our port between choosing it
    /// and the server's bind (PostgreSQL's `initdb` runs in between, and a crash test
    /// restarts the server on the same port) makes the server fail to start: CI saw
    /// `pg_ctl: could not start server` for exactly this.
    #[test]
    fn ports_are_free_and_outside_the_ephemeral_range() {
        let (low, high) = ephemeral_range_for_test();
        // Where the range leaves no room (e.g. `1024 65535`), the fallback is inside it.
        let room_outside = !ports_outside(low, high).is_empty();
        for _ in 0..50 {
            let port = free_port();
            assert!(
                !room_outside || !(low..=high).contains(&port),
                "{port} lies in the ephemeral range {low}-{high}"
            );
            std::net::TcpListener::bind(("127.0.0.1", port)).expect("the port is free");
        }
    }

    #[test]
    fn the_ports_outside_a_range_skip_it_and_the_well_known_ones() {
        let linux_default = ports_outside(32_768, 60_999);
        assert_eq!(linux_default.first(), Some(&10_000));
        assert!(linux_default.contains(&32_767) && linux_default.contains(&61_000));
        assert!(!linux_default.contains(&32_768) && !linux_default.contains(&60_999));
        assert_eq!(linux_default.last(), Some(&65_535));
        assert_eq!(linux_default.len(), 22_768 + 4_536);
        assert!(ports_outside(1_024, 65_535).is_empty());
        assert_eq!(ports_outside(32_768, 65_535).last(), Some(&32_767));
        assert_eq!(ports_outside(1_024, 40_000).first(), Some(&40_001));
        // A range ending among the well-known ports leaves them out all the same.
        assert_eq!(ports_outside(1_024, 5_000).first(), Some(&10_000));
    }

    fn ephemeral_range_for_test() -> (u16, u16) {
        let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .expect("Linux reports its ephemeral port range");
        let mut bounds = text
            .split_whitespace()
            .map(|bound| bound.parse().expect("a port"));
        (bounds.next().expect("low"), bounds.next().expect("high"))
    }
}
