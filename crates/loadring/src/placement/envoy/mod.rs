//! Envoy's consistent-hashing load balancers and its own bound on them
//! (`hash_balance_factor`).

pub(crate) mod bound;
pub mod maglev;
pub(crate) mod ring_hash;
