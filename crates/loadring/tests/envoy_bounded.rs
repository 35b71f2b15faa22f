//! Envoy's bounded load (`hash_balance_factor=F`) against a model written
//! from the words of the rule alone: Envoy's ring and Maglev table, its
//! slots, its MT19937 visiting order and its least-overloaded fallback, all
//! rebuilt here without calling the library (hashes with `xxhash-rust`
//! directly). Random sessions of ASSIGN, RELEASE, ADD and REMOVE, every
//! answer and every cap compared.

use std::collections::HashMap;

use loadring::{Balancer, Endpoint, Pick, PolicySpec, Request};
use proptest::prelude::*;
use xxhash_rust::xxh64::xxh64;

/// MT19937 (`init_genrand`, `genrand_int32`), from the authors' pseudo-code.
struct Twister {
    mt: Vec<u32>,
    at: usize,
}

impl Twister {
    fn new(seed: u32) -> Self {
        let mut mt = vec![seed];
        for i in 1..624u32 {
            let p = mt[i as usize - 1];
            mt.push(1_812_433_253u32.wrapping_mul(p ^ (p >> 30)).wrapping_add(i));
        }
        Twister { mt, at: 624 }
    }

    fn next(&mut self) -> u32 {
        if self.at == 624 {
            for k in 0..624 {
                let y = (self.mt[k] & 0x8000_0000) | (self.mt[(k + 1) % 624] & 0x7fff_ffff);
                let odd = if y % 2 == 1 { 0x9908_b0df } else { 0 };
                self.mt[k] = self.mt[(k + 397) % 624] ^ (y >> 1) ^ odd;
            }
            self.at = 0;
        }
        let mut y = self.mt[self.at];
        self.at += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }
}

/// How the model finds a key's owner.
#[derive(Debug, Clone, Copy)]
enum Scheme {
    /// Envoy's ring, `min_ring_size` 1024.
    Ring,
    /// Envoy's Maglev table of this (prime) size.
    Maglev(u64),
}

/// The model's node: name, weight, requests it holds.
#[derive(Debug, Clone)]
struct Node {
    name: String,
    weight: u32,
    load: u64,
}

/// Each node's index (in `nodes`) by hash: the owner of a hash.
enum Lookup {
    Ring(Vec<(u64, usize)>),
    Table(Vec<usize>),
}

impl Lookup {
    fn build(scheme: Scheme, nodes: &[Node]) -> Lookup {
        let sum: f64 = nodes.iter().map(|n| f64::from(n.weight)).sum();
        let w: Vec<f64> = nodes.iter().map(|n| f64::from(n.weight) / sum).collect();
        match scheme {
            Scheme::Ring => {
                // scale = min(ceil(min_w * 1024) / min_w, 8388608); a running
                // target; points xxHash64("<name>_<k>") while the count of
                // points emitted is below it.
                let min_w = w.iter().copied().fold(f64::INFINITY, f64::min);
                let scale = ((min_w * 1024.0).ceil() / min_w).min(8_388_608.0);
                let (mut target, mut count) = (0.0f64, 0.0f64);
                let mut points = Vec::new();
                for (i, n) in nodes.iter().enumerate() {
                    target += scale * w[i];
                    let mut k = 0;
                    while count < target {
                        points.push((xxh64(format!("{}_{k}", n.name).as_bytes(), 0), i));
                        k += 1;
                        count += 1.0;
                    }
                }
                points.sort();
                Lookup::Ring(points)
            }
            Scheme::Maglev(m) => {
                let mut order: Vec<usize> = (0..nodes.len()).collect();
                order.sort_by(|&a, &b| nodes[a].name.cmp(&nodes[b].name));
                let max_w = w.iter().copied().fold(0.0, f64::max);
                // (offset, skip, j, target) per host, sorted by name.
                let mut state: Vec<(u64, u64, u64, f64)> = order
                    .iter()
                    .map(|&i| {
                        let key = nodes[i].name.as_bytes();
                        (xxh64(key, 0) % m, xxh64(key, 1) % (m - 1) + 1, 0, 0.0)
                    })
                    .collect();
                let mut table = vec![usize::MAX; m as usize];
                let mut taken = 0;
                let mut it = 1u64;
                while taken < m {
                    for (h, &i) in order.iter().enumerate() {
                        if taken == m {
                            break;
                        }
                        let s = &mut state[h];
                        if (it as f64) * w[i] < s.3 {
                            continue;
                        }
                        s.3 += max_w;
                        let slot = |j: u64| ((s.0 + s.1 * j) % m) as usize;
                        while table[slot(s.2)] != usize::MAX {
                            s.2 += 1;
                        }
                        table[slot(s.2)] = i;
                        s.2 += 1;
                        taken += 1;
                    }
                    it += 1;
                }
                Lookup::Table(table)
            }
        }
    }

    fn owner(&self, h: u64) -> usize {
        match self {
            Lookup::Ring(points) => {
                let at = points.iter().position(|p| p.0 >= h).unwrap_or(0);
                points[at].1
            }
            Lookup::Table(table) => table[(h % table.len() as u64) as usize],
        }
    }
}

/// The rule, from its words, over the model's nodes.
struct Model {
    scheme: Scheme,
    f: u64,
    nodes: Vec<Node>,
    lookup: Lookup,
}

impl Model {
    fn new(scheme: Scheme, f: u64, nodes: Vec<Node>) -> Self {
        let lookup = Lookup::build(scheme, &nodes);
        Model {
            scheme,
            f,
            nodes,
            lookup,
        }
    }

    fn rebuild(&mut self) {
        self.lookup = Lookup::build(self.scheme, &self.nodes);
    }

    /// `slots_i` with `T` in flight.
    fn slots(&self, i: usize) -> u64 {
        let t: u64 = self.nodes.iter().map(|n| n.load).sum();
        let total = ((t + 1) * self.f).div_ceil(100);
        let sum: u64 = self.nodes.iter().map(|n| u64::from(n.weight)).sum();
        let w = f64::from(self.nodes[i].weight) / sum as f64;
        ((total as f64 * w).ceil() as u64).max(1)
    }

    fn acceptable(&self, i: usize) -> bool {
        self.nodes[i].load <= self.slots(i)
    }

    /// Where ASSIGN key goes; the load is taken.
    fn assign(&mut self, key: &str) -> usize {
        let h = xxh64(key.as_bytes(), 0);
        let owner = self.lookup.owner(h);
        let chosen = self.choose(h, owner);
        self.nodes[chosen].load += 1;
        chosen
    }

    /// The owner, then the visiting order without it: where a request and
    /// its retries go.
    fn preference(&self, key: &str) -> Vec<usize> {
        let h = xxh64(key.as_bytes(), 0);
        let owner = self.lookup.owner(h);
        let n = self.nodes.len();
        let mut index: Vec<usize> = (0..n).collect();
        let mut mt = Twister::new(h as u32);
        let mut order = vec![owner];
        for i in 0..n {
            let k = (n - i) as u64;
            let j = loop {
                let x = u64::from(mt.next()) / ((1u64 << 32) / k);
                if x < k {
                    break x as usize;
                }
            };
            index.swap(i, i + j);
            if index[i] != owner {
                order.push(index[i]);
            }
        }
        order
    }

    fn choose(&self, h: u64, owner: usize) -> usize {
        if self.acceptable(owner) {
            return owner;
        }
        let n = self.nodes.len();
        let mut index: Vec<usize> = (0..n).collect();
        let mut mt = Twister::new(h as u32);
        let factor = |i: usize| self.nodes[i].load as f64 / self.slots(i) as f64;
        let (mut least, mut least_factor) = (owner, factor(owner));
        for i in 0..n {
            let k = (n - i) as u64;
            let j = loop {
                let x = u64::from(mt.next()) / ((1u64 << 32) / k);
                if x < k {
                    break x as usize;
                }
            };
            index.swap(i, i + j);
            let candidate = index[i];
            if candidate == owner {
                continue;
            }
            if self.acceptable(candidate) {
                return candidate;
            }
            if factor(candidate) < least_factor {
                (least, least_factor) = (candidate, factor(candidate));
            }
        }
        least
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// A hot key (of two) or one of many cold ones.
    Assign {
        hot: bool,
        key: u32,
    },
    Release(u8),
    Add(u32),
    Remove(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (any::<bool>(), 0u32..1_000_000).prop_map(|(hot, key)| Op::Assign { hot, key }),
        3 => any::<u8>().prop_map(Op::Release),
        1 => (1u32..=8).prop_map(Op::Add),
        1 => any::<u8>().prop_map(Op::Remove),
    ]
}

fn scheme() -> impl Strategy<Value = Scheme> {
    prop_oneof![
        Just(Scheme::Ring),
        Just(Scheme::Maglev(307)),
        Just(Scheme::Maglev(1009))
    ]
}

fn spec_text(scheme: Scheme, f: u64) -> String {
    match scheme {
        Scheme::Ring => format!("ring_hash:hash_balance_factor={f}"),
        Scheme::Maglev(m) => format!("maglev:table_size={m} hash_balance_factor={f}"),
    }
}

/// One session through the library and the model, every answer compared.
fn run_session(scheme: Scheme, f: u64, weights: &[u32], ops: &[Op]) {
    let spec: PolicySpec = spec_text(scheme, f).parse().unwrap();
    let mut next_name = 0u32;
    let mut name = || {
        next_name += 1;
        format!("10.2.{}.{}:8080", next_name / 200, next_name % 200)
    };
    let nodes: Vec<Node> = weights
        .iter()
        .map(|&weight| Node {
            name: name(),
            weight,
            load: 0,
        })
        .collect();
    let endpoint = |n: &Node| Endpoint::new(&n.name).unwrap().with_weight(n.weight);
    let balancer = Balancer::new(spec, nodes.iter().map(endpoint).collect::<Vec<_>>()).unwrap();
    let mut model = Model::new(scheme, f, nodes);
    let mut held: HashMap<String, Vec<Pick>> = HashMap::new();
    for (step, op) in ops.iter().enumerate() {
        match *op {
            Op::Assign { hot, key } => {
                let key = if hot {
                    format!("hot-{}", key % 2)
                } else {
                    format!("user:{key}")
                };
                let order: Vec<String> = balancer
                    .candidates(&Request::key(&key))
                    .unwrap()
                    .map(|c| c.addr().to_string())
                    .collect();
                let want_order: Vec<&str> = model
                    .preference(&key)
                    .into_iter()
                    .map(|i| model.nodes[i].name.as_str())
                    .collect();
                assert_eq!(order, want_order, "step {step}: candidates of {key}");
                let want = model.assign(&key);
                let pick = balancer.pick(&Request::key(&key)).unwrap();
                assert_eq!(
                    pick.addr(),
                    model.nodes[want].name,
                    "step {step}: ASSIGN {key}"
                );
                held.entry(pick.addr().to_string()).or_default().push(pick);
            }
            Op::Release(i) => {
                let loaded: Vec<usize> = (0..model.nodes.len())
                    .filter(|&j| model.nodes[j].load > 0)
                    .collect();
                if loaded.is_empty() {
                    continue;
                }
                let j = loaded[i as usize % loaded.len()];
                model.nodes[j].load -= 1;
                drop(held.get_mut(&model.nodes[j].name).unwrap().pop());
            }
            Op::Add(weight) if model.nodes.len() < 13 => {
                let node = Node {
                    name: name(),
                    weight,
                    load: 0,
                };
                balancer.insert(endpoint(&node), ()).unwrap();
                model.nodes.push(node);
                model.rebuild();
            }
            Op::Remove(i) if model.nodes.len() > 3 => {
                let node = model.nodes.remove(i as usize % model.nodes.len());
                balancer.remove(node.name.as_str()).unwrap();
                held.remove(&node.name);
                model.rebuild();
            }
            Op::Add(_) | Op::Remove(_) => continue,
        }
        // Every cap is the most in flight a pick may leave: slots + 1.
        let loads = balancer.loads();
        assert_eq!(loads.len(), model.nodes.len(), "step {step}");
        for (i, n) in model.nodes.iter().enumerate() {
            assert_eq!(
                balancer.cap(n.name.as_str()).unwrap(),
                Some(model.slots(i) + 1),
                "step {step}: cap of {}",
                n.name
            );
            assert_eq!(
                (loads[i].0.addr(), loads[i].1),
                (n.name.as_str(), n.load),
                "step {step}: pool order and loads"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn sessions_match_the_model(
        scheme in scheme(),
        f in 100u64..=200,
        weights in prop::collection::vec(1u32..=8, 3..=13),
        ops in prop::collection::vec(op(), 300..600),
    ) {
        run_session(scheme, f, &weights, &ops);
    }
}

/// A long session on Envoy's default table (65537 slots) and ring, equal
/// and skewed weights, with every kind of step.
#[test]
fn a_long_session_on_the_default_sizes() {
    let ops: Vec<Op> = (0..1500u32)
        .map(|k| match k.wrapping_mul(2_654_435_761) % 20 {
            0 => Op::Add(1 + k % 5),
            1 => Op::Remove((k % 251) as u8),
            2..=8 => Op::Release((k % 253) as u8),
            r => Op::Assign {
                hot: r % 2 == 0,
                key: k.wrapping_mul(40503),
            },
        })
        .collect();
    for (scheme, f, weights) in [
        (Scheme::Maglev(65_537), 125, vec![3, 5, 2, 2, 1, 1]),
        (Scheme::Ring, 100, vec![1; 7]),
        (Scheme::Ring, 200, vec![8, 1, 1, 4]),
    ] {
        run_session(scheme, f, &weights, &ops);
    }
}

/// A local handle's picks are the shared picks: the same rule, the same
/// counters (its guards count in the running total too).
#[test]
fn a_local_handle_places_as_the_balancer() {
    let endpoints: Vec<Endpoint> = [3u32, 1, 2, 1, 1]
        .iter()
        .enumerate()
        .map(|(i, &w)| {
            Endpoint::new(format!("10.3.0.{i}:80"))
                .unwrap()
                .with_weight(w)
        })
        .collect();
    let spec = "ring_hash:hash_balance_factor=110";
    let shared = Balancer::new(spec.parse().unwrap(), endpoints.clone()).unwrap();
    let owner = Balancer::new(spec.parse().unwrap(), endpoints).unwrap();
    let local = owner.local();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut spilled = 0;
    for i in 0..400u32 {
        let key = if i % 3 == 0 {
            format!("user:{i}")
        } else {
            "hot".to_string()
        };
        let x = shared.pick(&Request::key(&key)).unwrap();
        let y = local.pick(&Request::key(&key)).unwrap();
        assert_eq!(x.addr(), y.addr(), "pick {i}: {key}");
        if key == "hot"
            && Some(x.addr())
                != shared
                    .route(&Request::key("hot"))
                    .unwrap()
                    .map(|r| r.addr().to_string())
                    .as_deref()
        {
            spilled += 1;
        }
        a.push(x);
        b.push(y);
        // Hold up to 40 requests, releasing the oldest first.
        if a.len() > 40 {
            drop(a.remove(0));
            drop(b.remove(0));
        }
        assert_eq!(shared.total_in_flight(), owner.total_in_flight());
    }
    assert!(spilled > 100, "the hot key spilled: {spilled}");
}
