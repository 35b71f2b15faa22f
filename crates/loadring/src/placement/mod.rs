//! Consistent hashing: the shared core (`hashing.rs`: plain and bounded
//! picks over any ring or table), the ring, and one file per system whose
//! placement a family reproduces.

pub(crate) mod brpc;
pub(crate) mod dubbo;
pub(crate) mod envoy;
pub(crate) mod haproxy;
pub(crate) mod hashing;
pub(crate) mod ketama;
pub(crate) mod nginx;
pub(crate) mod pixiu;
pub mod ring;
pub(crate) mod twemproxy;

/// More points than this is a typo, not a need (Envoy's largest ring).
pub(crate) const MAX_RING_POINTS: u64 = 8_388_608;
