//! The offline demo: three demo tools and a faux-provider script that calls them.
//!
//! The tools (weather, calculator, clock) are given to every agent the CLI builds, real
//! provider or not. Without a configured provider the model is [`DemoProvider`]: a faux
//! provider whose script plans tool calls from the latest user message (see [`script`]).

mod calc;
mod cities;
mod script;
mod tools;

pub use script::DemoProvider;
pub use tools::demo_tools;
