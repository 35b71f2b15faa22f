//! # loadring-tower
//!
//! Every [loadring] policy as a tower [`Service`](tower_service::Service)
//! and [`Layer`](tower_layer::Layer): key-affine routing (consistent hashing
//! that places keys like brpc, Envoy and memcached clients) with bounded
//! loads, for hyper-util clients, tonic channels and axum.
//!
//! - [`LoadRing`]: the service, over endpoint services of any type, a key
//!   extractor, and a fixed membership or a `tower::discover::Discover`
//!   stream ([`LoadRing::discover`], applied by a [`Driver`]).
//! - [`LoadRingLayer`]: one HTTP client over a list of hosts.
//! - [`RetryNext`]: a `tower::retry::Policy` that retries on the next
//!   candidate (the ring successor).
//! - [`OnResponse`] / [`OnBodyEnd`]: when a request's in-flight slot is
//!   released.
//! - [`LoadRing::load_report`] with [`orca_report`]: endpoints' own counts
//!   of their requests in service (ORCA's `endpoint-load-metrics` header),
//!   so that a bounded cap counts the load every client puts on them.
//!
//! The response future owns the request's [`Guard`] (its in-flight slot):
//! it is released on the response (or at the end of an HTTP body), on an
//! error, and when the future is dropped. See [`LoadRing`] for the readiness
//! contract and [`Keyless`] for requests without a key.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod completion;
mod discover;
mod error;
mod layer;
mod report;
mod retry;
mod service;

pub use completion::{Complete, Guard, GuardedBody, OnBodyEnd, OnResponse, Served};
pub use discover::Driver;
pub use error::{BoxError, Error, ErrorKind};
pub use layer::{LoadRingLayer, SetAuthority};
pub use report::{orca_report, OrcaReport, ReadReport, WithReport};
pub use retry::{Exclusions, RetryNext, Tried};
pub use service::{Keyless, LoadRing, ResponseFuture};
