//! A scenario's `mocks:` as the engine's `Mocks`: strings as for `--mock`, lists by arguments.

use crate::base::model::scenario::{MockScript, Scenario};
use crate::effects::mock::{MockError, Mocks};

/// The scenario's mocks, or the first outcome that does not parse.
pub fn mocks_of(scenario: &Scenario) -> Result<Mocks, MockError> {
    let by_id: Vec<String> = scenario
        .mocks
        .iter()
        .filter_map(|(id, script)| match script {
            MockScript::Outcomes(outcomes) => Some(format!("{id}={outcomes}")),
            MockScript::ByArguments(_) => None,
        })
        .collect();
    let mut mocks = Mocks::parse(&by_id)?;
    for (id, script) in &scenario.mocks {
        if let MockScript::ByArguments(entries) = script {
            for entry in entries {
                let when = entry.when.clone().unwrap_or_default();
                mocks
                    .by_arguments
                    .add(id, when.argv, when.path, &entry.result)?;
            }
        }
    }
    Ok(mocks)
}

/// Each outcome text of one mock with where it is (`""` for the string form, `/N/result` for
/// an entry), for checking.
pub fn outcome_texts(script: &MockScript) -> Vec<(String, &str)> {
    match script {
        MockScript::Outcomes(outcomes) => vec![(String::new(), outcomes.as_str())],
        MockScript::ByArguments(entries) => entries
            .iter()
            .enumerate()
            .map(|(index, entry)| (format!("/{index}/result"), entry.result.as_str()))
            .collect(),
    }
}
