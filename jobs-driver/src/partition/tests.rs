//! The turn, the shares and the claim's algorithm, on an in-memory queue.

use std::collections::HashMap;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::claim::{KeyLimits, claim_by_key};
use super::key::{key_text, partition_key_of};
use super::ops::KeyedClaimOps;
use super::rate::KeyRate;
use super::shares::{Share, shares};
use super::turn::PartitionTurn;
use crate::error::Result;
use crate::job::ClaimedJob;
use crate::limited_claim::run_ready;
use crate::queue_limits::RateLimit;

fn keys(names: &[&str]) -> Vec<Option<String>> {
    names.iter().map(|k| Some((*k).to_owned())).collect()
}

#[test]
fn shares_go_round_the_keys_one_at_a_time() {
    let none = HashMap::new();
    let got = shares(3, &none, &keys(&["a", "b"]), 5);
    assert_eq!(got, vec![Share { key: Some("a".into()), take: 3 }, Share { key: Some("b".into()), take: 2 }]);
    let many: Vec<Option<String>> = (0..100).map(|i| Some(format!("k{i:03}"))).collect();
    let got = shares(1, &none, &many, 10);
    assert_eq!(got.len(), 10, "ten keys get one each");
    assert_eq!(got[9].key.as_deref(), Some("k009"));
    assert!(shares(1, &none, &many, 0).is_empty());
    assert!(shares(1, &none, &[], 5).is_empty());
}

#[test]
fn keys_at_their_limit_get_nothing() {
    let running: HashMap<Option<String>, i64> =
        [(Some("hot".to_owned()), 1), (None, 1)].into_iter().collect();
    let got = shares(1, &running, &[None, Some("hot".into()), Some("cold".into())], 10);
    assert_eq!(got, vec![Share { key: Some("cold".into()), take: 1 }]);
    // A limit lowered below what runs gives nothing, never a negative share.
    let got = shares(0, &running, &keys(&["cold"]), 10);
    assert!(got.is_empty());
}

#[test]
fn the_turn_reads_back_and_bad_text_starts_a_round() {
    let turn = PartitionTurn {
        after: Some("acme".into()),
        round_end: Some("zeta".into()),
        unkeyed_empty_at: chrono::DateTime::from_timestamp_millis(1_700_000_000_123),
        unkeyed_skip_ms: 4_000,
    };
    assert_eq!(PartitionTurn::decode(Some(&turn.encode())), turn);
    assert_eq!(PartitionTurn::decode(Some("garbage")), PartitionTurn::default());
    assert_eq!(PartitionTurn::decode(None), PartitionTurn::default());
}

#[test]
fn keys_come_from_strings_numbers_and_booleans() {
    assert_eq!(key_text(&serde_json::json!("acme")), Some("acme".into()));
    assert_eq!(key_text(&serde_json::json!(42)), Some("42".into()));
    assert_eq!(key_text(&serde_json::json!(true)), Some("true".into()));
    assert_eq!(key_text(&serde_json::json!("")), None);
    assert_eq!(key_text(&serde_json::json!(null)), None);
    assert_eq!(key_text(&serde_json::json!({"a": 1})), None);
    assert_eq!(partition_key_of(r#"{"_partition_key":"acme","x":1}"#), Some("acme".into()));
    assert_eq!(partition_key_of("{}"), None);
}

/// A queue in memory: available jobs per key (`""`: unkeyed), listed and claimed as the
/// backends do.
#[derive(Default)]
struct Queue {
    waiting: BTreeMap<String, i64>,
    next_id: i64,
    /// The keys' rate usage, as `job_key_rates` holds it.
    rates: BTreeMap<String, KeyRate>,
}

impl Queue {
    fn with(jobs: &[(&str, i64)]) -> Queue {
        Queue { waiting: jobs.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect(), ..Queue::default() }
    }

    fn add(&mut self, key: &str, n: i64) {
        *self.waiting.entry(key.to_owned()).or_default() += n;
    }

    fn keyed(&self) -> impl Iterator<Item = &String> {
        self.waiting.iter().filter(|(k, n)| !k.is_empty() && **n > 0).map(|(k, _)| k)
    }
}

impl KeyedClaimOps for Queue {
    async fn keys(&mut self, after: Option<&str>, until: Option<&str>, n: i64) -> Result<Vec<String>> {
        let after = after.unwrap_or("");
        let keys = self.keyed().filter(|k| k.as_str() > after && until.is_none_or(|u| k.as_str() <= u));
        Ok(keys.take(usize::try_from(n).unwrap_or(0)).cloned().collect())
    }

    async fn last_key(&mut self) -> Result<Option<String>> {
        Ok(self.keyed().last().cloned())
    }

    async fn claim(&mut self, shares: &[Share]) -> Result<Vec<ClaimedJob>> {
        let mut jobs = Vec::new();
        for share in shares {
            let key = share.key.clone().unwrap_or_default();
            let waiting = self.waiting.entry(key.clone()).or_default();
            let took = share.take.min(*waiting);
            *waiting -= took;
            for _ in 0..took {
                self.next_id += 1;
                jobs.push(job(self.next_id, share.key.as_deref()));
            }
        }
        Ok(jobs)
    }

    async fn rate_blocked(&mut self, now: DateTime<Utc>) -> Result<i64> {
        Ok(self.rates.values().filter(|r| r.blocked_until.is_some_and(|t| t > now)).count() as i64)
    }

    async fn key_rates(&mut self, keys: &[String]) -> Result<Vec<KeyRate>> {
        Ok(keys.iter().filter_map(|k| self.rates.get(k).cloned()).collect())
    }

    async fn store_key_rates(&mut self, rates: &[KeyRate], stale_before: DateTime<Utc>) -> Result<()> {
        for rate in rates {
            self.rates.insert(rate.key.clone(), rate.clone());
        }
        self.rates.retain(|_, r| r.window.start >= stale_before);
        Ok(())
    }
}

fn job(id: i64, key: Option<&str>) -> ClaimedJob {
    let now = Utc::now();
    let meta = key.map_or("{}".to_owned(), |k| serde_json::json!({ "_partition_key": k }).to_string());
    ClaimedJob {
        id,
        kind: "k".into(),
        queue: "q".into(),
        args: "{}".into(),
        meta,
        tags: Vec::new(),
        priority: 0,
        attempt: 1,
        max_attempts: 1,
        timeout_ms: None,
        created_at: now,
        scheduled_at: now,
        attempted_at: now,
        workflow_id: None,
    }
}

/// One claim of up to `allowed` at `now`, nothing running: the keys it took (`""`:
/// unkeyed), sorted, and the turn after it.
fn claim(
    queue: &mut Queue,
    turn: &PartitionTurn,
    allowed: i64,
    now: DateTime<Utc>,
) -> (Vec<String>, PartitionTurn) {
    claim_running(queue, turn, allowed, now, &HashMap::new())
}

/// [`claim`] with `running` jobs, 1 per key.
fn claim_running(
    queue: &mut Queue,
    turn: &PartitionTurn,
    allowed: i64,
    now: DateTime<Utc>,
    running: &HashMap<Option<String>, i64>,
) -> (Vec<String>, PartitionTurn) {
    let limits = KeyLimits { per_key: Some(1), rate: None };
    let (jobs, next) = run_ready(claim_by_key(queue, limits, running, allowed, turn, now)).expect("claim");
    let mut keys: Vec<String> = jobs.iter().map(|j| partition_key_of(&j.meta).unwrap_or_default()).collect();
    keys.sort();
    (keys, next)
}

#[test]
fn a_claim_after_the_unkeyed_group_lists_the_keys_that_came_since() {
    // The last claim served only the unkeyed group, when no key waited; keys came since.
    let turn = PartitionTurn { after: Some(String::new()), ..PartitionTurn::default() };
    let mut queue = Queue::with(&[("", 5), ("a", 1), ("b", 1)]);
    let (keys, next) = claim(&mut queue, &turn, 3, Utc::now());
    assert_eq!(keys, ["", "a", "b"], "the keys are served with the unkeyed group");
    assert_eq!(next.round_end.as_deref(), Some("b"));
}

#[test]
fn every_key_and_the_unkeyed_group_are_served_while_new_keys_stream_in() {
    let mut queue = Queue::with(&[("", 3), ("a", 3), ("m", 3)]);
    let mut turn = PartitionTurn::default();
    let mut served: BTreeMap<String, usize> = BTreeMap::new();
    let t0 = Utc::now();
    for i in 0..60 {
        // Two new keys after every key so far, each claim; a claim takes two jobs.
        queue.add(&format!("n{i:03}a"), 1);
        queue.add(&format!("n{i:03}b"), 1);
        let (keys, next) = claim(&mut queue, &turn, 2, t0 + chrono::Duration::seconds(i));
        for key in keys {
            *served.entry(key).or_default() += 1;
        }
        turn = next;
    }
    // New keys come twice as fast as claims take them, but the old ones are not held back.
    assert_eq!(served.get("a"), Some(&3), "{served:?}");
    assert_eq!(served.get("m"), Some(&3), "{served:?}");
    assert!(served.get("").is_some_and(|n| *n >= 2), "the unkeyed group: {served:?}");
}

#[test]
fn an_empty_unkeyed_group_is_looked_for_less_and_less_often() {
    let mut queue = Queue::with(&[("a", 1_000)]);
    let t0 = Utc::now();
    let mut turn = PartitionTurn::default();
    let mut looked = Vec::new();
    for s in 0..120 {
        let before = turn.unkeyed_empty_at;
        let (_, next) = claim(&mut queue, &turn, 1, t0 + chrono::Duration::seconds(s));
        if next.unkeyed_empty_at != before {
            looked.push(s);
        }
        turn = next;
    }
    // 1 s, 2, 4, 8, 16, then every 30 s.
    assert_eq!(looked, [0, 1, 3, 7, 15, 31, 61, 91]);
    // Found again: looked for at every round.
    queue.add("", 1);
    let (keys, next) = claim(&mut queue, &turn, 2, t0 + chrono::Duration::seconds(200));
    assert_eq!(keys, ["", "a"]);
    assert_eq!((next.unkeyed_empty_at, next.unkeyed_skip_ms), (None, 0));
}

#[test]
fn a_key_at_its_limit_does_not_keep_the_rounds_from_ending() {
    // h runs its one all along; two new keys after every other come each claim.
    let mut queue = Queue::with(&[("", 49), ("a", 49), ("h", 10)]);
    let running: HashMap<Option<String>, i64> = [(Some("h".to_owned()), 1)].into_iter().collect();
    let (mut turn, t0) = (PartitionTurn::default(), Utc::now());
    let mut served: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..300 {
        queue.add(&format!("n{i:03}a"), 1);
        queue.add(&format!("n{i:03}b"), 1);
        let (keys, next) = claim_running(&mut queue, &turn, 1, t0 + chrono::Duration::seconds(i), &running);
        assert_eq!(keys.len(), 1, "claim {i} took {keys:?}");
        for key in keys {
            *served.entry(key).or_default() += 1;
        }
        turn = next;
    }
    assert!(!served.contains_key("h"), "h is at its limit");
    // Rounds double as the keys pile up: a handful of rounds in 300 claims, a turn each.
    for key in ["", "a"] {
        assert!(served.get(key).is_some_and(|n| *n >= 4), "{key:?}: {served:?}");
    }
}

#[test]
fn a_short_claim_takes_the_keys_that_came_after_the_last_round() {
    let running: HashMap<Option<String>, i64> = [(Some("p1".to_owned()), 1)].into_iter().collect();
    // The last round ended at p1 and the turn stopped there; p1 runs its one; p0 and p2
    // came since.
    let turn =
        PartitionTurn { after: Some("p1".into()), round_end: Some("p1".into()), ..PartitionTurn::default() };
    let mut queue = Queue::with(&[("p0", 1), ("p1", 1), ("p2", 1)]);
    let (keys, next) = claim_running(&mut queue, &turn, 3, Utc::now(), &running);
    assert_eq!(keys, ["p0", "p2"], "every key with room, none at its limit");
    assert_eq!((next.after.as_deref(), next.round_end.as_deref()), (Some("p2"), Some("p2")));
    // The unkeyed group served last, when no key waited before it: the keys that came
    // since are taken with it.
    let turn = PartitionTurn {
        after: Some(String::new()),
        round_end: Some("p0".into()),
        ..PartitionTurn::default()
    };
    let mut queue = Queue::with(&[("p0", 1), ("p1", 1)]);
    let running: HashMap<Option<String>, i64> = [(Some("p0".to_owned()), 1)].into_iter().collect();
    let (keys, _) = claim_running(&mut queue, &turn, 1, Utc::now(), &running);
    assert_eq!(keys, ["p1"]);
}

#[test]
fn a_rate_per_key_bounds_each_keys_starts_and_hides_no_other_key() {
    // 2 a minute per key, no limit on what runs; 300 keys used up their rate and wait
    // before the 2 that have not, in key order.
    let rate = RateLimit { allowed: 2, period_secs: 60 };
    let limits = KeyLimits { per_key: None, rate: Some(rate) };
    let t0 = chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 11, 30, 12, 0, 0).single().expect("a time");
    let mut queue = Queue::default();
    for i in 0..300 {
        queue.add(&format!("a{i:03}"), 5);
    }
    queue.add("solo", 1);
    let none = HashMap::new();
    let mut turn = PartitionTurn::default();
    let mut started: BTreeMap<String, i64> = BTreeMap::new();
    for _ in 0..4 {
        let (jobs, next) =
            run_ready(claim_by_key(&mut queue, limits, &none, 1_000, &turn, t0)).expect("claim");
        for job in jobs {
            *started.entry(partition_key_of(&job.meta).unwrap_or_default()).or_default() += 1;
        }
        turn = next;
    }
    assert_eq!(started.remove("solo"), Some(1));
    assert_eq!(started.len(), 300);
    assert!(started.values().all(|n| *n == 2), "2 each in the minute: {started:?}");
    queue.add("z1", 5);
    queue.add("z2", 5);
    // A small claim still reaches the keys that may start, past the 300 used up.
    let (jobs, next) = run_ready(claim_by_key(&mut queue, limits, &none, 3, &turn, t0)).expect("claim");
    let mut keys: Vec<String> = jobs.iter().filter_map(|j| partition_key_of(&j.meta)).collect();
    keys.sort();
    assert_eq!(keys.len(), 3, "z1 and z2 may start 2 each: {keys:?}");
    assert!(keys.iter().all(|k| k == "z1" || k == "z2"), "{keys:?}");
    turn = next;
    // A period and a slice later, every key may start 2 again; the old rows are dropped.
    let later = t0 + chrono::Duration::seconds(63);
    let (jobs, _) = run_ready(claim_by_key(&mut queue, limits, &none, 10_000, &turn, later)).expect("claim");
    assert_eq!(jobs.len(), 300 * 2 + 2 * 2, "every key may start 2 again");
    assert!(queue.rates.contains_key("solo"), "its window counts nothing from now on, and goes next");
    let (jobs, _) =
        run_ready(claim_by_key(&mut queue, limits, &none, 10, &turn, later + chrono::Duration::seconds(1)))
            .expect("claim");
    assert!(jobs.is_empty());
    assert!(!queue.rates.contains_key("solo"), "a window that counts no start is forgotten");
    assert_eq!(queue.rates.len(), 302);
}

#[test]
fn a_key_over_a_lowered_rate_holds_no_other_key_back() {
    // 3 a minute: a starts 2 (not used up). Then 1 a minute: a is used up, though its row
    // does not say so; a claim of 1 still reaches b, and marks a blocked for the next.
    let t0 = chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 11, 30, 12, 0, 0).single().expect("a time");
    let limits = |allowed| KeyLimits { per_key: None, rate: Some(RateLimit { allowed, period_secs: 60 }) };
    let mut queue = Queue::with(&[("a", 5)]);
    let none = HashMap::new();
    let turn = PartitionTurn::default();
    let (jobs, turn) = run_ready(claim_by_key(&mut queue, limits(3), &none, 2, &turn, t0)).expect("claim");
    assert_eq!(jobs.len(), 2);
    assert_eq!(queue.rates["a"].blocked_until, None);
    queue.add("b", 1);
    let turn = PartitionTurn { after: None, ..turn };
    let (jobs, _) = run_ready(claim_by_key(&mut queue, limits(1), &none, 1, &turn, t0)).expect("claim");
    let keys: Vec<Option<String>> = jobs.iter().map(|j| partition_key_of(&j.meta)).collect();
    assert_eq!(keys, [Some("b".to_owned())]);
    assert!(queue.rates["a"].blocked_until.is_some_and(|t| t > t0), "a is now stored blocked");
}

#[test]
fn many_keys_over_a_lowered_rate_are_walked_past_with_their_own_rows() {
    // 140 keys start 2 each under 3 a minute; then 2 a minute: all used up, unforeseen. A
    // claim of 1 walks past them all (doubling its walk) to z, and gives none of them more.
    let t0 = chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 11, 30, 12, 0, 0).single().expect("a time");
    let limits = |allowed| KeyLimits { per_key: None, rate: Some(RateLimit { allowed, period_secs: 60 }) };
    let mut queue = Queue::default();
    for i in 0..140 {
        queue.add(&format!("u{i:03}"), 3);
    }
    let none = HashMap::new();
    // 2 at once per key, so that each starts exactly 2 of its 3 a minute.
    let first = KeyLimits { per_key: Some(2), ..limits(3) };
    let (jobs, _) = run_ready(claim_by_key(&mut queue, first, &none, 1_000, &PartitionTurn::default(), t0))
        .expect("claim");
    assert_eq!(jobs.len(), 280);
    assert!(queue.rates.values().all(|r| r.blocked_until.is_none()));
    queue.add("z", 1);
    let at = t0 + chrono::Duration::seconds(1);
    let (jobs, _) = run_ready(claim_by_key(&mut queue, limits(2), &none, 1, &PartitionTurn::default(), at))
        .expect("claim");
    let keys: Vec<Option<String>> = jobs.iter().map(|j| partition_key_of(&j.meta)).collect();
    assert_eq!(keys, [Some("z".to_owned())]);
    let two = RateLimit { allowed: 2, period_secs: 60 };
    for (key, rate) in queue.rates.iter().filter(|(k, _)| k.starts_with('u')) {
        assert_eq!(two.started(Some(&rate.window), at), 2, "{key}: its starts are kept");
    }
}
