//! How many route shards the plain-HTTP listener uses (docs/xds.md, "Route shards"): a fixed
//! number, or `auto`, which turns shards on when the model has many hosts and off again when it
//! has few.
//!
//! Shards make an update of one host an update of 1/N of Envoy's route table, at the price of a
//! Lua filter on every plain-HTTP request. Below a couple of thousand hosts Envoy rebuilds its
//! whole route table in a few milliseconds and the filter is pure cost; above, the rebuild is
//! most of a new route's way to its first request. `auto` starts shards at
//! [`AutoRouteShards::on_at_hosts`] hosts and stops them below [`AutoRouteShards::off_below_hosts`]:
//! the gap keeps a cluster near one threshold from switching back and forth, since each switch
//! is an update of Envoy's HTTP listener.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::MAX_HTTP_ROUTE_SHARDS;

/// The route shards setting (`sluice serve --http-route-shards`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteShards {
    /// Always this many (1: one route configuration, `ingress_http`).
    Fixed(u16),
    /// Shards when the model has many hosts.
    Auto(AutoRouteShards),
}

/// When `auto` uses shards, and how many.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AutoRouteShards {
    /// The shards when they are on.
    pub shards: u16,
    /// Shards go on when the model has at least this many hosts.
    pub on_at_hosts: usize,
    /// Shards go off when the model has fewer hosts than this.
    pub off_below_hosts: usize,
    /// After a switch, the route configurations of the previous HTTP listener are kept up to
    /// date this long beside the new ones: Envoy serves the connections it accepted before the
    /// switch with the previous listener until it has drained them (its `--drain-time-s`, 600 s
    /// by default), and those connections see changes made in the meantime.
    pub keep_previous_for: Duration,
}

impl Default for AutoRouteShards {
    fn default() -> Self {
        AutoRouteShards {
            shards: 16,
            on_at_hosts: 2_000,
            off_below_hosts: 1_000,
            keep_previous_for: Duration::from_secs(15 * 60),
        }
    }
}

impl Default for RouteShards {
    fn default() -> Self {
        RouteShards::Auto(AutoRouteShards::default())
    }
}

impl RouteShards {
    /// The shards for a model of `hosts` hosts, when the previous model had `current` (None: no
    /// previous model, as in a one-off translation or at the start).
    pub fn count(&self, hosts: usize, current: Option<u16>) -> u16 {
        match *self {
            RouteShards::Fixed(n) => n.max(1),
            RouteShards::Auto(auto) => {
                let on = match current {
                    Some(n) if n > 1 => hosts >= auto.off_below_hosts,
                    _ => hosts >= auto.on_at_hosts,
                };
                if on { auto.shards.max(1) } else { 1 }
            }
        }
    }
}

impl RouteShards {
    /// How long the previous listener's route configurations are kept after a switch; None
    /// when they are not (a fixed number never switches).
    pub fn keep_previous_for(&self) -> Option<Duration> {
        match self {
            RouteShards::Auto(auto) if !auto.keep_previous_for.is_zero() => {
                Some(auto.keep_previous_for)
            }
            _ => None,
        }
    }
}

impl fmt::Display for RouteShards {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RouteShards::Fixed(n) => write!(f, "{n}"),
            RouteShards::Auto(_) => f.write_str("auto"),
        }
    }
}

impl FromStr for RouteShards {
    type Err = String;

    /// `auto`, or a number of shards from 1 to [`MAX_HTTP_ROUTE_SHARDS`].
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "auto" {
            return Ok(RouteShards::default());
        }
        match s.parse::<u16>() {
            Ok(n) if (1..=MAX_HTTP_ROUTE_SHARDS).contains(&n) => Ok(RouteShards::Fixed(n)),
            _ => Err(format!(
                "expected `auto` or a number of shards from 1 to {MAX_HTTP_ROUTE_SHARDS} \
                 (1: one route configuration)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_auto_and_numbers_and_refuses_the_rest() {
        assert_eq!("auto".parse(), Ok(RouteShards::default()));
        assert_eq!("1".parse(), Ok(RouteShards::Fixed(1)));
        assert_eq!("256".parse(), Ok(RouteShards::Fixed(256)));
        for bad in ["0", "257", "-1", "", "Auto", "16x", "65536"] {
            let err = bad.parse::<RouteShards>().unwrap_err();
            assert!(
                err.contains("expected `auto` or a number of shards from 1 to 256"),
                "{err}"
            );
        }
        for s in ["auto", "1", "16"] {
            assert_eq!(s.parse::<RouteShards>().unwrap().to_string(), s);
        }
    }

    #[test]
    fn fixed_is_fixed_whatever_the_hosts() {
        for hosts in [0, 1, 5_000, 1_000_000] {
            assert_eq!(RouteShards::Fixed(1).count(hosts, None), 1);
            assert_eq!(RouteShards::Fixed(7).count(hosts, Some(1)), 7);
            assert_eq!(RouteShards::Fixed(0).count(hosts, Some(3)), 1);
        }
    }

    #[test]
    fn auto_goes_on_at_the_upper_threshold_and_off_below_the_lower() {
        let auto = RouteShards::default();
        // From nothing: the upper threshold decides.
        assert_eq!(auto.count(0, None), 1);
        assert_eq!(auto.count(1_999, None), 1);
        assert_eq!(auto.count(2_000, None), 16);
        // Off: stays off until the upper threshold.
        assert_eq!(auto.count(1_500, Some(1)), 1);
        assert_eq!(auto.count(1_999, Some(1)), 1);
        assert_eq!(auto.count(2_000, Some(1)), 16);
        // On: stays on down to the lower threshold.
        assert_eq!(auto.count(1_999, Some(16)), 16);
        assert_eq!(auto.count(1_000, Some(16)), 16);
        assert_eq!(auto.count(999, Some(16)), 1);
        // A walk up and down switches exactly twice.
        let mut current = None;
        let mut switches = 0;
        for hosts in (0..=2_500).chain((0..=2_500).rev()) {
            let next = auto.count(hosts, current);
            if current.is_some_and(|c| c != next) {
                switches += 1;
            }
            current = Some(next);
        }
        assert_eq!(switches, 2);
    }
}
