//! Tests of the SCXML import: fixtures converted, written, loaded, compiled and run on a virtual clock.

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::json;

use super::{ImportError, Imported, import_file, scxml_to_protocol, to_yaml};
use crate::base::event::{Event, Origin};
use crate::base::value::Value;
use crate::effects::EffectRequest;
use crate::pipeline::actions::{Directive, Host, InvokeRequest, LogRecord, SendRequest};
use crate::pipeline::compile::machine::Machine;
use crate::runtime::run::Interpreter;

const TRAFFIC_LIGHT: &str = include_str!("../../../tests/fixtures/scxml/traffic_light.scxml");
const MEDIA_PLAYER: &str = include_str!("../../../tests/fixtures/scxml/media_player.scxml");
const HEALTH_CHECKS: &str = include_str!("../../../tests/fixtures/scxml/health_checks.scxml");
const THERMOSTAT: &str = include_str!("../../../tests/fixtures/scxml/thermostat.scxml");
const GRADER: &str = include_str!("../../../tests/fixtures/scxml/grader.scxml");
const INTERNAL_TRANSITION: &str =
    include_str!("../../../tests/fixtures/scxml/internal_transition.scxml");
const INTERNAL_SEND: &str = include_str!("../../../tests/fixtures/scxml/internal_send.scxml");
const FOREACH: &str = include_str!("../../../tests/fixtures/scxml/foreach.scxml");

/// A host with a virtual clock: delayed sends wait until `advance` reaches them.
#[derive(Default)]
struct VirtualHost {
    now: u64,
    sequence: u64,
    /// (deadline, sequence, send id, event), kept sorted.
    timers: Vec<(u64, u64, Option<String>, Event)>,
    external_queue: VecDeque<Event>,
    logs: Vec<String>,
}

impl Host for VirtualHost {
    fn log(&mut self, record: LogRecord) {
        self.logs.push(record.message.to_string());
    }

    fn send(&mut self, request: SendRequest) {
        if request.delay_milliseconds == 0 {
            self.external_queue.push_back(request.event);
            return;
        }
        self.sequence += 1;
        self.timers.push((
            self.now + request.delay_milliseconds,
            self.sequence,
            request.id.as_deref().map(String::from),
            request.event,
        ));
        self.timers
            .sort_by_key(|(deadline, sequence, ..)| (*deadline, *sequence));
    }

    fn cancel(&mut self, send_id: &str) {
        self.timers
            .retain(|(_, _, id, _)| id.as_deref() != Some(send_id));
    }

    fn start_effect(&mut self, _request: EffectRequest) {
        panic!("imported protocols start no effects");
    }

    fn start_invoke(&mut self, _request: InvokeRequest) {
        panic!("imported protocols invoke nothing");
    }

    fn cancel_invoke(&mut self, _id: &str) {}

    fn emit(&mut self, _directive: Directive) {
        panic!("imported protocols emit no directives");
    }
}

/// An imported document, running.
struct Run {
    machine: Arc<Machine>,
    interpreter: Interpreter,
    host: VirtualHost,
    yaml: String,
}

/// Imports SCXML and writes it as YAML, panicking with the errors if it cannot be imported.
fn import(scxml: &str) -> String {
    match scxml_to_protocol(scxml) {
        Ok(protocol) => to_yaml(&protocol),
        Err(errors) => panic!("{}", render(&errors)),
    }
}

fn render(errors: &[ImportError]) -> String {
    errors
        .iter()
        .map(|error| error.render("test.scxml"))
        .collect::<Vec<_>>()
        .join("\n")
}

impl Run {
    /// Import → YAML → load → compile → start.
    fn start(scxml: &str) -> Run {
        let yaml = import(scxml);
        let loaded = crate::pipeline::load::load_text("imported.yaml", yaml.clone())
            .unwrap_or_else(|diagnostics| {
                panic!(
                    "{}\n{yaml}",
                    crate::base::diagnostic::render_all(&diagnostics)
                )
            });
        let machine = Arc::new(crate::pipeline::compile::compile(&loaded).unwrap_or_else(
            |diagnostics| {
                panic!(
                    "{}\n{yaml}",
                    crate::base::diagnostic::render_all(&diagnostics)
                )
            },
        ));
        let inputs = machine.bind_inputs(&[]).expect("no inputs");
        let mut run = Run {
            interpreter: Interpreter::new(machine.clone(), inputs),
            machine,
            host: VirtualHost::default(),
            yaml,
        };
        run.interpreter.start(&mut run.host).expect("start");
        run.deliver_queued();
        run
    }

    fn deliver_queued(&mut self) {
        while let Some(event) = self.host.external_queue.pop_front() {
            if !self.interpreter.is_running() {
                return;
            }
            self.interpreter
                .handle(&event, &mut self.host)
                .expect("macrostep");
        }
    }

    fn send(&mut self, name: &str) -> &mut Run {
        self.send_with(name, serde_json::Value::Null)
    }

    fn send_with(&mut self, name: &str, data: serde_json::Value) -> &mut Run {
        let event = Event::named(
            &self.machine,
            name,
            Value::from_json(&data),
            Origin::External,
        );
        self.interpreter
            .handle(&event, &mut self.host)
            .expect("macrostep");
        self.deliver_queued();
        self
    }

    /// Moves the virtual clock on, delivering due timers one at a time, in order.
    fn advance(&mut self, milliseconds: u64) -> &mut Run {
        let until = self.host.now + milliseconds;
        while let Some(position) = self
            .host
            .timers
            .first()
            .filter(|(deadline, ..)| *deadline <= until)
            .map(|_| 0)
        {
            let (deadline, _, _, event) = self.host.timers.remove(position);
            self.host.now = deadline;
            self.interpreter
                .handle(&event, &mut self.host)
                .expect("macrostep");
            self.deliver_queued();
        }
        self.host.now = until;
        self
    }

    /// Every active state, in document order.
    fn configuration(&self) -> Vec<String> {
        self.interpreter
            .configuration()
            .map(|state| self.machine.state(state).id.to_string())
            .collect()
    }

    /// The active atomic states, in document order.
    fn leaves(&self) -> Vec<String> {
        self.interpreter
            .active_leaves()
            .into_iter()
            .map(String::from)
            .collect()
    }

    fn context(&self, name: &str) -> serde_json::Value {
        self.interpreter
            .context_value(name)
            .expect("context variable")
            .to_json()
    }

    /// The final state the run ended in, and its output.
    fn outcome(&self) -> (String, serde_json::Value) {
        let outcome = self.interpreter.outcome().expect("the run has ended");
        (
            outcome
                .state_name(&self.machine)
                .expect("a final state")
                .to_string(),
            outcome.output.to_json(),
        )
    }

    fn take_logs(&mut self) -> Vec<String> {
        std::mem::take(&mut self.host.logs)
    }
}

#[test]
fn traffic_light_runs_on_its_timers() {
    let mut run = Run::start(TRAFFIC_LIGHT);
    assert!(run.yaml.contains("delay: 2s"), "{}", run.yaml);
    assert!(run.yaml.contains("delay: 1500ms"), "{}", run.yaml);
    assert!(run.yaml.contains("delay: 500ms"), "{}", run.yaml);
    assert_eq!(run.leaves(), ["red"]);
    assert_eq!(run.advance(1_999).leaves(), ["red"]);
    assert_eq!(run.advance(1).leaves(), ["green"]);
    assert_eq!(run.advance(1_499).leaves(), ["green"]);
    assert_eq!(run.advance(1).leaves(), ["yellow"]);
    assert_eq!(run.advance(500).leaves(), ["red"]);
    assert_eq!(run.advance(2_000).leaves(), ["green"]);
    // The emergency cancels green's timer: red keeps its full 2 s.
    assert_eq!(run.send("emergency").leaves(), ["red"]);
    assert_eq!(run.advance(1_500).leaves(), ["red"]);
    assert_eq!(run.advance(500).leaves(), ["green"]);
}

#[test]
fn media_player_restores_shallow_and_deep_history() {
    let mut run = Run::start(MEDIA_PLAYER);
    assert_eq!(run.configuration(), ["idle"]);
    // Nothing recorded yet: the deep history's default transition.
    assert_eq!(
        run.send("start").configuration(),
        ["player", "playing", "fast_speed"]
    );
    assert_eq!(run.send("pause").configuration(), ["paused"]);
    // Shallow: `playing` again, entered at its initial child.
    assert_eq!(
        run.send("resume").configuration(),
        ["player", "playing", "normal_speed"]
    );
    assert_eq!(run.send("faster").leaves(), ["fast_speed"]);
    assert_eq!(run.send("pause").leaves(), ["paused"]);
    // Deep: exactly where it was.
    assert_eq!(
        run.send("resume_exact").configuration(),
        ["player", "playing", "fast_speed"]
    );
    assert_eq!(run.send("stop").configuration(), ["player", "stopped"]);
    assert_eq!(run.send("pause").leaves(), ["paused"]);
    assert_eq!(run.send("resume").configuration(), ["player", "stopped"]);
    assert_eq!(run.send("play").leaves(), ["normal_speed"]);
}

#[test]
fn health_checks_finish_when_every_region_is_final() {
    let mut run = Run::start(HEALTH_CHECKS);
    assert_eq!(
        run.configuration(),
        [
            "checking",
            "disk",
            "disk_pending",
            "network",
            "network_pending"
        ]
    );
    run.send_with("network.ok", json!({"mbps": 40}));
    assert_eq!(run.leaves(), ["disk_pending", "network_done"]);
    // done.state.network carried the final state's donedata.
    assert_eq!(run.context("speed"), json!(40));
    assert_eq!(run.send("disk.ok").configuration(), Vec::<String>::new());
    assert_eq!(
        run.outcome(),
        ("healthy".into(), json!({"result": "ok", "speed": 40}))
    );

    let mut aborted = Run::start(HEALTH_CHECKS);
    aborted.send("disk.ok");
    assert_eq!(aborted.leaves(), ["disk_done", "network_pending"]);
    aborted.send("abort");
    assert_eq!(aborted.outcome(), ("failed".into(), json!(null)));
}

#[test]
fn thermostat_moves_by_eventless_transitions() {
    let mut run = Run::start(THERMOSTAT);
    assert_eq!(run.configuration(), ["monitoring", "comfortable"]);
    let readings = [
        (30, "cooling"),
        (24, "cooling"),
        (22, "comfortable"),
        (10, "heating"),
        (17, "heating"),
        (18, "comfortable"),
        (25, "comfortable"),
    ];
    for (temperature, expected) in readings {
        run.send_with("reading", json!(temperature));
        assert_eq!(run.leaves(), [expected], "after a reading of {temperature}");
        assert_eq!(run.context("temperature"), json!(temperature));
    }
}

#[test]
fn grader_assigns_branches_and_logs() {
    let mut run = Run::start(GRADER);
    assert_eq!(run.context("limits"), json!({"pass": 50, "merit": 70}));
    // The guard holds only once something was graded.
    assert_eq!(run.send("finish").leaves(), ["grading"]);
    run.send_with("score", json!({"points": 80}));
    assert_eq!(run.take_logs(), ["grade: merit", "score: 80"]);
    assert_eq!(run.context("grade"), json!("merit"));
    run.send_with("score", json!({"points": 55}));
    assert_eq!(run.take_logs(), ["grade: pass", "score: 55"]);
    run.send_with("score", json!({"points": 10}));
    assert_eq!(run.take_logs(), ["failed", "score: 10"]);
    assert_eq!(run.context("graded"), json!(3));
    run.send("finish");
    // ECMAScript division: 10 / 100 and 3 / 2 do not truncate.
    assert_eq!(
        run.outcome(),
        (
            "finished".into(),
            json!({"grade": "fail", "ratio": 0.1, "half": 1.5})
        )
    );
}

#[test]
fn internal_transitions_do_not_reenter_their_source() {
    let mut run = Run::start(INTERNAL_TRANSITION);
    assert_eq!(run.configuration(), ["parent", "first"]);
    assert_eq!(run.context("entries"), json!(1));
    assert_eq!(run.send("inside").configuration(), ["parent", "second"]);
    assert_eq!(run.context("entries"), json!(1));
    assert_eq!(run.send("outside").configuration(), ["parent", "second"]);
    assert_eq!(run.context("entries"), json!(2));
    assert_eq!(run.send("touch").configuration(), ["parent", "second"]);
    assert_eq!(run.take_logs(), ["touched touch"]);
    assert_eq!(run.context("entries"), json!(2));
}

#[test]
fn internal_sends_are_raised_before_external_events() {
    let mut run = Run::start(INTERNAL_SEND);
    assert!(run.yaml.contains("raise: internal_step"), "{}", run.yaml);
    assert_eq!(run.leaves(), ["waiting"]);
    run.send("go");
    assert_eq!(run.outcome(), ("done".into(), json!(null)));
}

#[test]
fn writes_the_expected_yaml() {
    let scxml = r#"<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" name="small" initial="b">
  <datamodel><data id="n" expr="1"/><data id="label">on</data></datamodel>
  <state id="a">
    <transition event="go" cond="n &gt; 1" target="b"/>
    <transition event="go" target="c"/>
    <transition event="error.*" target="c"><log label="error" expr="_event.name"/></transition>
  </state>
  <state id="b">
    <onentry><send event="tick" delay="2.5s" id="t"><param name="n" expr="n"/></send></onentry>
    <transition event="tick" target="a"/>
  </state>
  <final id="c"><donedata><content>{"done": "${not a template}"}</content></donedata></final>
</scxml>"#;
    let expected = r#"# yaml-language-server: $schema=../schemas/protocol.schema.json
id: small
context:
  n: 1
  label: "on"
errors: scxml
initial: b
states:
  a:
    "on":
      go:
        - target: b
          guard: n > 1
        - c
      error.*:
        target: c
        actions:
          - log: "error: ${event.name}"
  b:
    entry:
      - send: tick
        data:
          n: "${n}"
        delay: 2500ms
        id: t
    "on":
      tick: a
  c:
    type: final
    output:
      done: "$${not a template}"
"#;
    assert_eq!(import(scxml), expected);
}

#[test]
fn keeps_transition_order_when_grouping_cannot_change_it() {
    // `a`, `b`, `a`: the second `a` moves ahead of `b`, which never matches `a`.
    let scxml = r#"<scxml xmlns="http://www.w3.org/2005/07/scxml" name="order">
  <datamodel><data id="ready" expr="false"/></datamodel>
  <state id="s">
    <transition event="a" cond="ready" target="t"/>
    <transition event="b" target="t"/>
    <transition event="a" target="u"/>
  </state>
  <state id="t"/><state id="u"/>
</scxml>"#;
    let protocol = scxml_to_protocol(scxml).unwrap_or_else(|errors| panic!("{}", render(&errors)));
    assert_eq!(
        protocol["states"]["s"]["on"],
        json!({"a": [{"target": "t", "guard": "ready"}, "u"], "b": "t"})
    );
}

#[test]
fn merges_handlers_only_when_no_earlier_one_can_fail() {
    let scxml = r#"<scxml xmlns="http://www.w3.org/2005/07/scxml" name="handlers">
  <datamodel><data id="n" expr="0"/></datamodel>
  <state id="s">
    <onentry><log label="first"/><raise event="r"/></onentry>
    <onentry><assign location="n" expr="n + 1"/></onentry>
  </state>
</scxml>"#;
    let protocol = scxml_to_protocol(scxml).unwrap_or_else(|errors| panic!("{}", render(&errors)));
    assert_eq!(
        protocol["states"]["s"]["entry"],
        json!([{"log": "first"}, {"raise": "r"}, {"assign": {"n": "n + 1"}}])
    );
}

#[test]
fn a_dotted_assign_location_becomes_a_path_assignment() {
    let scxml = r#"<scxml xmlns="http://www.w3.org/2005/07/scxml" name="paths">
  <datamodel><data id="verdicts" expr="({})"/></datamodel>
  <state id="s">
    <onentry><assign location="verdicts.critic" expr="'approved'"/></onentry>
  </state>
</scxml>"#;
    let protocol = scxml_to_protocol(scxml).unwrap_or_else(|errors| panic!("{}", render(&errors)));
    assert_eq!(
        protocol["states"]["s"]["entry"],
        json!([{"assign": {"verdicts.critic": "'approved'"}}])
    );
    let undeclared = errors(&document(
        "<onentry><assign location=\"nothing.y\" expr=\"1\"/></onentry>",
    ));
    assert!(
        undeclared.iter().any(|error| error
            .message
            .contains("`nothing` is not the id of a <data> element")),
        "{}",
        render(&undeclared)
    );
}

/// Imports a document that must fail, and returns its errors.
fn errors(scxml: &str) -> Vec<ImportError> {
    match scxml_to_protocol(scxml) {
        Ok(protocol) => panic!("expected errors, got {}", to_yaml(&protocol)),
        Err(errors) => errors,
    }
}

/// Asserts one error names `element` at `line` and says `words`.
fn assert_error(scxml: &str, element: &str, line: u32, words: &str) {
    let found = errors(scxml);
    assert!(
        found.iter().any(|error| error.element == element
            && error.line == line
            && error.message.contains(words)),
        "no <{element}> error on line {line} saying `{words}` in:\n{}",
        render(&found)
    );
}

/// Wraps elements in a document whose `<scxml>` is on line 1 and `s`'s content starts on
/// line 3.
fn document(inside_state: &str) -> String {
    format!(
        "<scxml xmlns=\"http://www.w3.org/2005/07/scxml\" name=\"t\">\n<datamodel><data id=\"x\" expr=\"0\"/></datamodel>\n<state id=\"s\">\n{inside_state}\n</state>\n<state id=\"other\"/>\n</scxml>"
    )
}

#[test]
fn refuses_scripts() {
    assert_error(
        &document("<onentry>\n<script>x = 1;</script>\n</onentry>"),
        "script",
        5,
        "<script> cannot be imported",
    );
    assert_error(
        "<scxml xmlns=\"http://www.w3.org/2005/07/scxml\">\n<script src=\"a.js\"/>\n<state id=\"a\"/>\n</scxml>",
        "script",
        2,
        "cannot be imported",
    );
}

/// W3C tests 150, 152, 153, 155 and 156: each state of the fixture passes on to the next only if
/// its loop did what SCXML says, so reaching `pass` is all of them passing.
#[test]
fn foreach_passes_the_w3c_tests() {
    let run = Run::start(FOREACH);
    assert!(
        run.yaml
            .contains("- foreach: Var3\n        item: Var4\n        index: Var5\n        do:"),
        "{}",
        run.yaml
    );
    // The variables only a loop names are declared, after the document's own.
    assert!(
        run.yaml.contains("  Var7: 0\n  Var4: null\n  Var5: null\n"),
        "{}",
        run.yaml
    );
    assert_eq!(run.outcome(), ("pass".into(), json!(null)));
}

#[test]
fn refuses_foreach_misuse_at_its_attribute() {
    let inside = |foreach: &str| document(&format!("<onentry>\n{foreach}\n</onentry>"));
    assert_error(
        &inside("<foreach item=\"i\"><log expr=\"i\"/></foreach>"),
        "foreach",
        5,
        "<foreach> needs a `array` attribute",
    );
    assert_error(
        &inside("<foreach array=\"[1]\"/>"),
        "foreach",
        5,
        "<foreach> needs a `item` attribute",
    );
    assert_error(
        &inside("<foreach array=\"[1]\" item=\"a.b\"/>"),
        "foreach",
        5,
        "the data id `a.b` cannot be a context variable",
    );
    assert_error(
        &inside("<foreach array=\"[1]\" item=\"i\" index=\"i\"/>"),
        "foreach",
        5,
        "`i` is already the item",
    );
    assert_error(
        &inside("<foreach array=\"[1]\" item=\"i\" other=\"1\"/>"),
        "foreach",
        5,
        "other",
    );
    // The body is converted like any block: its errors are its own.
    assert_error(
        &inside("<foreach array=\"[1]\" item=\"i\">\n<script/>\n</foreach>"),
        "script",
        6,
        "<script> cannot be imported",
    );
}

#[test]
fn refuses_computed_data() {
    let scxml = "<scxml xmlns=\"http://www.w3.org/2005/07/scxml\">\n<datamodel>\n<data id=\"a\" expr=\"1\"/>\n<data id=\"b\" expr=\"a + 1\"/>\n</datamodel>\n<state id=\"s\"/>\n</scxml>";
    assert_error(scxml, "data", 4, "only literal data values can be imported");
    assert_error(
        "<scxml xmlns=\"http://www.w3.org/2005/07/scxml\">\n<datamodel>\n<data id=\"a\" src=\"values.json\"/>\n</datamodel>\n<state id=\"s\"/>\n</scxml>",
        "data",
        3,
        "`src` cannot be imported",
    );
}

#[test]
fn refuses_unconvertible_conditions() {
    assert_error(
        &document("<transition event=\"e\" cond=\"typeof x == 'number'\" target=\"other\"/>"),
        "transition",
        4,
        "cannot convert the condition `typeof x == 'number'` to CEL",
    );
    assert_error(
        &document("<transition cond=\"y &gt; 1\" target=\"other\"/>"),
        "transition",
        4,
        "unknown variable `y`",
    );
    assert_error(
        &document("<onentry>\n<if cond=\"x++\"><log label=\"a\"/></if>\n</onentry>"),
        "if",
        5,
        "`++`",
    );
}

#[test]
fn refuses_a_transition_order_it_cannot_keep() {
    let scxml = document(
        "<transition event=\"a\" cond=\"x &gt; 0\" target=\"other\"/>\n<transition event=\"*\" target=\"other\"/>\n<transition event=\"a\"/>",
    );
    assert_error(
        &scxml,
        "transition",
        6,
        "transition order cannot be preserved",
    );
    assert_error(&scxml, "transition", 6, "line 5");
    // A prefix overlaps too: `error` matches `error.exec`.
    let prefix = document(
        "<transition event=\"error.exec\" target=\"other\"/>\n<transition event=\"error\" target=\"other\"/>\n<transition event=\"error.exec\"/>",
    );
    assert_error(
        &prefix,
        "transition",
        6,
        "transition order cannot be preserved",
    );
}

#[test]
fn refuses_what_protocols_cannot_express() {
    let cases = [
        (
            "<invoke type=\"scxml\" src=\"child.scxml\"/>",
            "invoke",
            4,
            "`src` can only be imported from a file",
        ),
        ("<blink/>", "blink", 4, "unknown element <blink>"),
        (
            "<onentry><send event=\"e\" target=\"#_internal\" delay=\"1s\"/></onentry>",
            "send",
            4,
            "delayed send to `#_internal`",
        ),
        (
            "<onentry><send event=\"e\" target=\"http://example.com\"/></onentry>",
            "send",
            4,
            "the target `http://example.com` cannot be imported",
        ),
        (
            "<onentry><send event=\"e\" delayexpr=\"x * 100 + 'ms'\"/></onentry>",
            "send",
            4,
            "the delay expression `x * 100 + 'ms'` cannot be imported",
        ),
        (
            "<onentry><send event=\"e\" delay=\"1.5ms\"/></onentry>",
            "send",
            4,
            "whole number of milliseconds",
        ),
        (
            "<onentry><assign location=\"x[0]\" expr=\"1\"/></onentry>",
            "assign",
            4,
            "indexes an array, and a protocol's path assignment names only map keys",
        ),
        (
            "<transition event=\"e\" target=\"nowhere\"/>",
            "transition",
            4,
            "unknown state `nowhere`",
        ),
        (
            "<onentry><send event=\"e\" idlocation=\"x\"/></onentry>",
            "send",
            4,
            "`idlocation`",
        ),
        (
            "<onentry><log expr=\"_event.origin\"/></onentry>",
            "log",
            4,
            "`_event.origin` is not available",
        ),
        (
            "<onentry><elseif cond=\"true\"/></onentry>",
            "elseif",
            4,
            "cannot appear inside <onentry>",
        ),
        (
            "<onentry><assign location=\"x\" expr=\"1\"/></onentry>\n<onentry><log label=\"after\"/></onentry>",
            "onentry",
            5,
            "cannot be merged with the one on line 4",
        ),
        (
            "<history id=\"h\"><transition target=\"other\"/></history>",
            "transition",
            4,
            "is outside this <state>",
        ),
        (
            "<state id=\"inner\"/><history id=\"h\"><transition target=\"inner\"><log label=\"x\"/></transition></history>",
            "transition",
            4,
            "actions in the <transition> of <history>",
        ),
        (
            "<transition event=\"e\" type=\"sideways\"/>",
            "transition",
            4,
            "not a transition type",
        ),
        (
            "<transition event=\"a..b\"/>",
            "transition",
            4,
            "the event descriptor `a..b` cannot be imported",
        ),
    ];
    for (inside, element, line, words) in cases {
        assert_error(&document(inside), element, line, words);
    }
}

#[test]
fn refuses_bad_ids_and_malformed_documents() {
    assert_error(
        "<scxml xmlns=\"http://www.w3.org/2005/07/scxml\">\n<state id=\"a.b\"/>\n</scxml>",
        "state",
        2,
        "cannot be a protocol state id",
    );
    assert_error(
        "<scxml xmlns=\"http://www.w3.org/2005/07/scxml\">\n<state id=\"a\"/>\n<final id=\"a\"/>\n</scxml>",
        "final",
        3,
        "duplicate state id `a`; the first is on line 2",
    );
    assert_error(
        "<scxml xmlns=\"http://www.w3.org/2005/07/scxml\">\n<datamodel><data id=\"event\"/></datamodel>\n<state id=\"a\"/>\n</scxml>",
        "data",
        2,
        "reserved",
    );
    let malformed = errors("<scxml>\n<state id=\"a\">\n</scxml>");
    assert_eq!(malformed.len(), 1);
    assert_eq!(malformed[0].line, 3);
    assert!(malformed[0].message.contains("not well-formed XML"));
    assert_error(
        "<machine/>",
        "machine",
        1,
        "the root element must be <scxml>",
    );
}

#[test]
fn errors_render_with_the_file_and_element() {
    let found = errors(&document("<onentry>\n<script/>\n</onentry>"));
    assert!(
        found[0]
            .render("door.scxml")
            .starts_with("door.scxml:5:1: <script>: <script> cannot be imported"),
        "{}",
        found[0].render("door.scxml")
    );
    let diagnostic =
        found[0].diagnostic("door.scxml", &document("<onentry>\n<script/>\n</onentry>"));
    let shown = diagnostic.to_string();
    assert!(shown.contains("--> door.scxml:5:1"), "{shown}");
    assert!(shown.contains("5 | <script/>"), "{shown}");
}

#[test]
fn skips_foreign_namespaces_and_names_anonymous_states() {
    let scxml = r#"<scxml xmlns="http://www.w3.org/2005/07/scxml" xmlns:editor="urn:example:editor" editor:layout="grid">
  <editor:view zoom="2"/>
  <state editor:x="10">
    <state id="state_1"/>
    <state/>
  </state>
</scxml>"#;
    let protocol = scxml_to_protocol(scxml).unwrap_or_else(|errors| panic!("{}", render(&errors)));
    // Written ids are kept; generated ones skip them.
    assert_eq!(
        protocol["states"],
        json!({"state_2": {"states": {"state_1": {}, "state_3": {}}}})
    );
    assert_eq!(protocol["id"], json!("imported"));
}

#[test]
fn refuses_documents_nested_too_deeply() {
    let depth = 5_000;
    let states = format!(
        "<scxml xmlns=\"http://www.w3.org/2005/07/scxml\">{}{}</scxml>",
        (0..depth)
            .map(|level| format!("<state id=\"s{level}\">"))
            .collect::<String>(),
        "</state>".repeat(depth)
    );
    let found = errors(&states);
    assert!(
        found
            .iter()
            .any(|error| error.message.contains("nest more than 64")),
        "{}",
        render(&found)
    );
    let conditions = format!(
        "<scxml xmlns=\"http://www.w3.org/2005/07/scxml\"><state id=\"s\"><onentry>{}{}</onentry></state></scxml>",
        "<if cond=\"true\">".repeat(depth),
        "</if>".repeat(depth)
    );
    let found = errors(&conditions);
    assert!(
        found
            .iter()
            .any(|error| error.element == "if" && error.message.contains("nest more than 64")),
        "{}",
        render(&found)
    );
}

#[test]
fn converts_delay_expressions() {
    let scxml = r#"<scxml xmlns="http://www.w3.org/2005/07/scxml" name="delays">
  <datamodel><data id="pause" expr="'2s'"/></datamodel>
  <state id="first">
    <onentry><send event="next" delayexpr="'2.5s'"/></onentry>
    <transition event="next" target="second"/>
  </state>
  <state id="second">
    <onentry><send event="next" delayexpr="pause"/></onentry>
    <transition event="next" target="third"/>
  </state>
  <state id="third"/>
</scxml>"#;
    let mut run = Run::start(scxml);
    assert!(run.yaml.contains("delay: 2500ms"), "{}", run.yaml);
    assert!(run.yaml.contains("delay: pause"), "{}", run.yaml);
    assert_eq!(run.advance(2_499).leaves(), ["first"]);
    assert_eq!(run.advance(1).leaves(), ["second"]);
    assert_eq!(run.advance(1_999).leaves(), ["second"]);
    assert_eq!(run.advance(1).leaves(), ["third"]);
}

/// Imports a document as the file `parent.scxml` (in `directory`), with its children.
fn import_children_in(
    directory: &std::path::Path,
    scxml: &str,
) -> Result<Imported, Vec<ImportError>> {
    import_file(scxml, &directory.join("parent.scxml"))
}

fn import_children(scxml: &str) -> Imported {
    import_children_in(std::path::Path::new(""), scxml)
        .unwrap_or_else(|errors| panic!("{}", render(&errors)))
}

/// A parent whose state `talking` invokes `invoke` (its attributes and children), with the
/// transitions `transitions`; `<scxml>` is on line 1, the invoke on line 4.
fn invoking(invoke_attributes: &str, invoke_children: &str, transitions: &str) -> String {
    format!(
        "<scxml xmlns=\"http://www.w3.org/2005/07/scxml\" name=\"parent\">\n<datamodel><data id=\"question\" expr=\"41\"/><data id=\"answer\" expr=\"0\"/></datamodel>\n<state id=\"talking\">\n<invoke id=\"kid\" {invoke_attributes}>{invoke_children}</invoke>\n{transitions}\n</state>\n<final id=\"done\"/>\n</scxml>"
    )
}

/// A child document that reports `ready`, answers `ping` with `pong` and ends.
const CHILD: &str = "<content><scxml xmlns=\"http://www.w3.org/2005/07/scxml\" name=\"child\"><datamodel><data id=\"start\" expr=\"0\"/></datamodel><state id=\"waiting\"><onentry><send event=\"ready\" target=\"#_parent\"/></onentry><transition event=\"ping\" target=\"answered\"><send event=\"pong\" target=\"#_parent\"><param name=\"n\" expr=\"_event.data.n + start\"/></send></transition></state><final id=\"answered\"/></scxml></content>";

#[test]
fn imports_inline_children_as_files_of_their_own() {
    let child_with_question = CHILD
        .replace("\"start\"", "\"question\"")
        .replace("+ start", "+ question");
    let imported = import_children(&invoking(
        "type=\"scxml\" autoforward=\"true\" namelist=\"question\"",
        &child_with_question,
        "<transition event=\"ready\"><send event=\"ping\" target=\"#_kid\"><param name=\"n\" expr=\"1\"/></send></transition>\n<transition event=\"pong\" target=\"done\"/>",
    ));
    assert_eq!(imported.file_name, "parent.yaml");
    let talking = &imported.protocol["states"]["talking"];
    assert_eq!(
        talking["invoke"],
        json!([{"id": "kid", "protocol": "parent.kid.yaml", "inputs": {"question": "${question}"}, "autoforward": true}])
    );
    assert_eq!(
        talking["on"]["ready"]["actions"],
        json!([{"send": "ping", "data": {"n": 1}, "to": "kid"}])
    );
    assert_eq!(imported.children.len(), 1);
    let (name, child) = &imported.children[0];
    assert_eq!(name, "parent.kid.yaml");
    assert_eq!(
        child["states"]["waiting"]["entry"],
        json!([{"send": "ready", "to": "parent"}])
    );
    // Without a <data id="question"> in the child, SCXML would drop the value: the import says so.
    let found = errors(&invoking("namelist=\"question\"", CHILD, ""));
    assert!(
        found.iter().any(|error| error.element == "invoke"
            && error.message.contains("no <data id=\"question\">")),
        "{}",
        render(&found)
    );
}

#[test]
fn makes_the_data_an_invoker_sets_typed_inputs() {
    let imported = import_children(&invoking(
        "",
        &format!("<param name=\"start\" expr=\"question + 1\"/>{CHILD}"),
        "<transition event=\"done.invoke.kid\" target=\"done\"/>",
    ));
    let (_, child) = &imported.children[0];
    assert_eq!(
        child["inputs"],
        json!({"start": {"type": "number", "default": 0}})
    );
    assert!(child.get("context").is_none(), "{child}");
    assert_eq!(
        imported.protocol["states"]["talking"]["invoke"][0]["inputs"],
        json!({"start": "${question + 1}"})
    );
    // The written files load and compile together.
    let directory =
        std::env::temp_dir().join(format!("protocol-run-import-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    for (name, protocol) in std::iter::once((&imported.file_name, &imported.protocol)).chain(
        imported
            .children
            .iter()
            .map(|(name, protocol)| (name, protocol)),
    ) {
        std::fs::write(directory.join(name), to_yaml(protocol)).unwrap();
    }
    let loaded = crate::pipeline::load::load_file(&directory.join("parent.yaml")).expect("loads");
    if let Err(diagnostics) = crate::pipeline::compile::compile(&loaded) {
        panic!("{}", crate::base::diagnostic::render_all(&diagnostics));
    }
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn reads_children_from_src_relative_to_the_file() {
    let directory =
        std::env::temp_dir().join(format!("protocol-run-import-src-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(directory.join("children")).unwrap();
    let child = CHILD
        .trim_start_matches("<content>")
        .trim_end_matches("</content>");
    std::fs::write(directory.join("children/child.scxml"), child).unwrap();
    let parent = invoking("src=\"children/child.scxml\"", "", "");
    let imported = import_children_in(&directory, &parent)
        .unwrap_or_else(|errors| panic!("{}", render(&errors)));
    assert_eq!(imported.children[0].0, "parent.kid.yaml");
    // An error in the child is located in the child's file.
    std::fs::write(
        directory.join("children/child.scxml"),
        child.replace("<final", "<script/><final"),
    )
    .unwrap();
    let errors = import_children_in(&directory, &parent).expect_err("the child has a <script>");
    assert!(
        errors.iter().any(|error| error.element == "script"
            && error
                .file
                .as_deref()
                .is_some_and(|file| file.ends_with("child.scxml"))),
        "{}",
        render(&errors)
    );
    // A document that invokes itself is refused, not followed forever.
    let itself = parent.replace("children/child.scxml", "parent.scxml");
    std::fs::write(directory.join("parent.scxml"), &itself).unwrap();
    let errors = import_children_in(&directory, &itself).expect_err("a cycle");
    assert!(
        render(&errors).contains("already being invoked"),
        "{}",
        render(&errors)
    );
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn puts_finalize_on_the_transitions_that_take_the_childs_events() {
    let imported = import_children(&invoking(
        "",
        &format!(
            "{CHILD}<finalize><assign location=\"answer\" expr=\"_event.data.n\"/></finalize>"
        ),
        "<transition event=\"ready pong done.invoke.kid\" target=\"done\"/>\n<transition event=\"other\" target=\"done\"/>",
    ));
    let on = &imported.protocol["states"]["talking"]["on"];
    assert_eq!(
        on["ready pong done.invoke.kid"],
        json!({"target": "done", "actions": [{
            "if": "event.invokeid == 'kid' || event.name == 'done.invoke.kid'",
            "then": [{"assign": {"answer": "event.data.n"}}],
        }]})
    );
    assert_eq!(on["other"], json!("done"));
}

#[test]
fn refuses_finalize_it_cannot_place_exactly() {
    let finalize =
        format!("{CHILD}<finalize><assign location=\"answer\" expr=\"_event.data.n\"/></finalize>");
    let cases = [
        (
            "<transition event=\"pong done.invoke.kid\" target=\"done\"/>".to_string(),
            "a transition without `cond` for `ready`",
        ),
        (
            "<transition event=\"*\" cond=\"answer > 0\" target=\"done\"/><transition event=\"*\"/>".to_string(),
            "reads `answer`, which the finalize assigns",
        ),
        (
            "<transition event=\"*\" target=\"done\"><log label=\"bye\"/></transition>".to_string(),
            "skip the actions of the `*` transition",
        ),
        (
            "<onexit><log expr=\"answer\"/></onexit><transition event=\"*\" target=\"done\"/>".to_string(),
            "the `exit` actions of `talking` use `answer`",
        ),
    ];
    for (transitions, words) in cases {
        assert_error(&invoking("", &finalize, &transitions), "finalize", 4, words);
    }
    assert_error(
        &invoking(
            "",
            &format!("{CHILD}<finalize><log label=\"x\"/></finalize>"),
            "<transition event=\"*\" target=\"done\"/>",
        ),
        "log",
        4,
        "only <assign> and <if>",
    );
    let parallel = invoking("", &finalize, "<transition event=\"*\" target=\"done\"/>").replace(
        "<final id=\"done\"/>",
        "<final id=\"done\"/><parallel id=\"p\"><state id=\"r1\"/><state id=\"r2\"/></parallel>",
    );
    assert_error(&parallel, "finalize", 4, "<parallel> states");
}

#[test]
fn refuses_invocations_it_cannot_express() {
    let cases = [
        (
            "idlocation=\"where\"",
            CHILD.to_string(),
            "invoke",
            "`idlocation` cannot be imported",
        ),
        (
            "type=\"http://www.w3.org/TR/ccxml/\"",
            CHILD.to_string(),
            "invoke",
            "the invocation type",
        ),
        (
            "typeexpr=\"'scxml'\"",
            CHILD.to_string(),
            "invoke",
            "`typeexpr` cannot be imported",
        ),
        (
            "srcexpr=\"where\"",
            String::new(),
            "invoke",
            "`srcexpr` cannot be imported",
        ),
        (
            "",
            "<content expr=\"question\"/>".to_string(),
            "content",
            "a computed child document",
        ),
        ("", String::new(), "invoke", "needs its child document"),
        (
            "",
            format!("<param name=\"nothing\" expr=\"1\"/>{CHILD}"),
            "param",
            "no <data id=\"nothing\">",
        ),
        (
            "",
            CHILD
                .replace(
                    "<onentry>",
                    "<onentry><assign location=\"start\" expr=\"1\"/>",
                )
                .replace("</content>", "</content><param name=\"start\" expr=\"1\"/>"),
            "assign",
            "read-only input",
        ),
        (
            "",
            CHILD
                .replace("expr=\"0\"", "expr=\"null\"")
                .replace("</content>", "</content><param name=\"start\" expr=\"1\"/>"),
            "data",
            "inputs are typed",
        ),
    ];
    let cases = cases.into_iter().chain([(
        "autoforward=\"true\"",
        CHILD.replace("event=\"ping\"", "event=\"*\""),
        "invoke",
        "`autoforward` of `kid` cannot be imported",
    )]);
    for (attributes, children, element, words) in cases {
        let found = errors(&invoking(attributes, &children, ""));
        assert!(
            found
                .iter()
                .any(|error| error.element == element && error.message.contains(words)),
            "no <{element}> error saying `{words}` in:\n{}",
            render(&found)
        );
    }
    assert_error(
        &invoking(
            "",
            CHILD,
            "<transition event=\"ready\"><send event=\"ping\" target=\"#_stranger\"/></transition>",
        ),
        "send",
        5,
        "the target `#_stranger` cannot be imported",
    );
    assert_error(
        &invoking(
            "",
            CHILD,
            "<transition event=\"ready\"><send event=\"ping\" target=\"#_kid\" delay=\"1s\"/></transition>",
        ),
        "send",
        5,
        "a delayed send to a child or the parent",
    );
}
