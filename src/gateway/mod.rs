//! The gateway, grouped by what each part serves. A request passes `proxy/` (the proxy's phases),
//! which asks `decision/` (the one sequence that decides it, for every interface: the route and,
//! only when its rule reads it, the body; who calls; the mask, the evidence) and forwards it
//! through `backend/`, giving a decision made before on the same head again where nothing it
//! rests on changed (`as_it_came`). The decision's evidence is `evidence/` (the
//! header verified, the registries asked, decisions cached); people sign in through `people/`;
//! a fleet shares `fleet/` (Redis, the replay store); `connections/` bounds connections and
//! bodies. Beside the proxy: `decision_api/` (the decision service for other proxies and
//! AuthZEN) and the admin listener. `snapshot` is the state of one configuration, swapped on
//! reload; `reject` is the table every refusal is answered from.

pub mod admin;
pub mod as_it_came;
pub mod backend;
pub mod background;
pub mod capabilities;
pub mod connections;
pub mod decision;
pub mod decision_api;
pub mod evidence;
pub mod fleet;
pub mod people;
pub mod proxy;
pub mod purge;
pub mod reject;
pub mod server;
pub mod snapshot;
