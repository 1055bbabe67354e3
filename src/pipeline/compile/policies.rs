//! Named retry policies: a name in an effect's `retry:` stands for the policy's retriers.

use super::Compiler;
use crate::base::diagnostic::did_you_mean;
use crate::base::model::effect::Retrier;
use crate::base::model::{RetryEntry, RetryPlan};
use crate::pipeline::load::source::Source;

/// One retrier of an effect and where it is written: in the effect, or in a named policy,
/// perhaps in an imported file.
pub struct RetrierSite<'a> {
    pub source: &'a Source,
    pub pointer: String,
    pub retrier: Retrier,
}

impl<'a> Compiler<'a> {
    /// The retriers of `plan` (written at `pointer`), in order, names replaced by their
    /// policies' retriers; `None` in place of each unknown name (reported).
    pub fn retriers(
        &mut self,
        plan: Option<&RetryPlan>,
        pointer: &str,
    ) -> Vec<Option<RetrierSite<'a>>> {
        let Some(plan) = plan else {
            return Vec::new();
        };
        let mut sites = Vec::new();
        for (index, entry) in plan.entries().into_iter().enumerate() {
            let entry_pointer = match plan {
                RetryPlan::Named(_) => pointer.to_string(),
                RetryPlan::Listed(_) => format!("{pointer}/{index}"),
            };
            match entry {
                RetryEntry::Retrier(retrier) => sites.push(Some(RetrierSite {
                    source: self.source,
                    pointer: entry_pointer,
                    retrier,
                })),
                RetryEntry::Named(name) => match self.policy(&name, &entry_pointer) {
                    Some(policy) => sites.extend(policy.into_iter().map(Some)),
                    None => sites.push(None),
                },
            }
        }
        sites
    }

    /// The retriers of the policy `name`, or `None` when no policy has that name (reported).
    fn policy(&mut self, name: &str, pointer: &str) -> Option<Vec<RetrierSite<'a>>> {
        let definitions = self.definitions;
        let Some(policy) = definitions.policies.get(name) else {
            if definitions.incomplete {
                // The import that failed is reported; the name may be one of its policies.
                return None;
            }
            let known = definitions.policies.keys().map(String::as_str);
            let help = did_you_mean(name, known).unwrap_or_else(|| {
                if definitions.policies.is_empty() {
                    "define it under `retry_policies:`, or import a file that does".into()
                } else {
                    let names: Vec<&str> =
                        definitions.policies.keys().map(String::as_str).collect();
                    format!("the retry policies are: {}", names.join(", "))
                }
            });
            self.value_error(
                pointer,
                format!("no retry policy is named `{name}`"),
                Some(help),
            );
            return None;
        };
        let source = definitions.source(policy.origin, self.protocol_source);
        Some(
            policy
                .value
                .iter()
                .enumerate()
                .map(|(index, retrier)| RetrierSite {
                    source,
                    pointer: format!("{}/{index}", policy.pointer),
                    retrier: retrier.clone(),
                })
                .collect(),
        )
    }

    /// Runs `body` with problems located in `source`.
    pub fn in_source<T>(&mut self, source: &'a Source, body: impl FnOnce(&mut Self) -> T) -> T {
        let outer_source = self.source;
        self.source = source;
        let result = body(self);
        self.source = outer_source;
        result
    }
}
