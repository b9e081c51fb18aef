//! A provider crate written on the public `AssistantMessageBuilder` alone
//! (`examples/custom-provider`) replays every conformance scenario exactly as the faux provider
//! does: the scenario runner streams the scenario's scripted responses through it instead of the
//! faux provider, in pieces of the same size, and the traces equal the reference's goldens
//! (the public scenarios and our own).

use std::path::Path;
use std::sync::Arc;

use custom_provider::ScriptedProvider;
use pi_types::{AssistantMessage, StreamFn};

fn scripted(responses: Vec<AssistantMessage>, token_size: usize) -> Arc<dyn StreamFn> {
    // The faux provider streams `4 × tokenSize` UTF-16 units per delta.
    let provider = ScriptedProvider::new(token_size.saturating_mul(4));
    for response in responses {
        provider.push_reply(response);
    }
    Arc::new(provider)
}

fn check(dir: &Path) -> Result<usize, String> {
    let replay = |path: &Path| {
        let trace = pi_testkit::replay::replay_file_with(path, &scripted).map_err(|e| e.to_string())?;
        // The one text that is each provider's own wording: the error of an exhausted script.
        Ok(trace.replace("No more scripted replies queued", "No more faux responses queued"))
    };
    pi_integration_tests::check_scenarios(dir, "", &replay, &|v| v)
}

#[test]
fn a_builder_provider_replays_the_public_scenarios_like_the_faux_provider() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    for dir in ["conformance", "conformance-extra"] {
        match check(&fixtures.join(dir)) {
            Ok(count) => assert!(count > 0, "no scenarios in {dir}"),
            Err(failures) => panic!("{dir}: {failures}"),
        }
    }
}
