//! Per-request overhead of `LoadRing` over calling the endpoint service
//! directly, and against `tower::balance::p2c::Balance` over the same
//! endpoint services, in one run.
//!
//! ```text
//! cargo bench -p loadring-tower --bench overhead -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! The endpoint services answer at once (an in-process `service_fn`), so the
//! figures are the balancers' own cost per request: `poll_ready`, `call`
//! (key extraction, pick and reservation for loadring; the ready-cache and
//! the choice of two for p2c) and driving the response future to its end
//! (releasing the slot). Every variant builds the same request each
//! iteration (an `http::Request<()>` with an `x-user` header drawn from 1024
//! user ids): subtracting `direct` leaves the balancer's share. Futures are
//! polled once with a no-op waker (`now_or_never`): no runtime is involved.

use std::convert::Infallible;
use std::future::{ready, Ready};
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use futures_util::FutureExt;
use http::{HeaderValue, Request, Response};
use loadring::Endpoint;
use loadring_tower::LoadRing;
use tower::balance::p2c::Balance;
use tower::discover::ServiceList;
use tower::load::{CompleteOnResponse, PendingRequests};
use tower::{service_fn, Service, ServiceExt};

const USERS: usize = 1024;

type Endpoint0 = tower::util::ServiceFn<fn(Request<()>) -> Ready<Result<Response<()>, Infallible>>>;

fn endpoint_service() -> Endpoint0 {
    fn answer(_: Request<()>) -> Ready<Result<Response<()>, Infallible>> {
        ready(Ok(Response::new(())))
    }
    service_fn(answer as fn(_) -> _)
}

fn users() -> Vec<HeaderValue> {
    (0..USERS)
        .map(|i| HeaderValue::from_str(&format!("user:{i}")).unwrap())
        .collect()
}

fn request(user: &HeaderValue) -> Request<()> {
    let mut req = Request::new(());
    req.headers_mut().insert("x-user", user.clone());
    req
}

fn user_key(req: &Request<()>) -> Option<HeaderValue> {
    req.headers().get("x-user").cloned()
}

/// One request through `svc`: ready, call, response.
#[inline]
fn once<S: Service<Request<()>>>(svc: &mut S, req: Request<()>) -> S::Response
where
    S::Error: std::fmt::Debug,
{
    svc.ready().now_or_never().unwrap().unwrap();
    svc.call(req).now_or_never().unwrap().unwrap()
}

type Ring = LoadRing<Endpoint0, fn(&Request<()>) -> Option<HeaderValue>>;

fn ring(spec: &str, n: usize) -> Ring {
    let backends = (0..n).map(|i| {
        let e = Endpoint::new(format!("10.0.0.{}:8080", i + 1)).unwrap();
        (e, endpoint_service())
    });
    LoadRing::new(spec.parse().unwrap(), backends, user_key as fn(&_) -> _).unwrap()
}

fn p2c(n: usize) -> Balance<ServiceList<Vec<PendingRequests<Endpoint0>>>, Request<()>> {
    let services = (0..n)
        .map(|_| PendingRequests::new(endpoint_service(), CompleteOnResponse::default()))
        .collect::<Vec<_>>();
    Balance::new(ServiceList::new(services))
}

fn overhead(c: &mut Criterion) {
    let users = users();
    let mut g = c.benchmark_group("per_request");
    let mut i = 0usize;
    let mut next = move || {
        i = (i + 1) % USERS;
        i
    };

    let mut direct = endpoint_service();
    g.bench_function("direct", |b| {
        b.iter(|| black_box(once(&mut direct, request(&users[next()]))))
    });
    for n in [3, 32] {
        for spec in [
            "c_murmurhash_bl",
            "c_murmurhash",
            "maglev:load_factor=1.25",
            "rr",
        ] {
            let mut svc = ring(spec, n);
            g.bench_function(format!("loadring/{spec}/{n}"), |b| {
                b.iter(|| black_box(once(&mut svc, request(&users[next()]))))
            });
            assert_eq!(svc.balancer().total_in_flight(), 0);
        }
        let mut svc = p2c(n);
        g.bench_function(format!("p2c/{n}"), |b| {
            b.iter(|| black_box(once(&mut svc, request(&users[next()]))))
        });
    }
    g.finish();
}

criterion_group!(benches, overhead);
criterion_main!(benches);
