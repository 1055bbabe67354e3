//! Tests of the SCXML import: fixtures converted, written, loaded, compiled and run on a virtual clock.

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::json;

use super::{ImportError, scxml_to_protocol, to_yaml};
use crate::actions::{Directive, Host, InvokeRequest, LogRecord, SendRequest};
use crate::compile::machine::Machine;
use crate::effects::EffectRequest;
use crate::run::Interpreter;
use crate::run::event::{Event, Origin};
use crate::value::Value;

const TRAFFIC_LIGHT: &str = include_str!("../../tests/fixtures/scxml/traffic_light.scxml");
const MEDIA_PLAYER: &str = include_str!("../../tests/fixtures/scxml/media_player.scxml");
const HEALTH_CHECKS: &str = include_str!("../../tests/fixtures/scxml/health_checks.scxml");
const THERMOSTAT: &str = include_str!("../../tests/fixtures/scxml/thermostat.scxml");
const GRADER: &str = include_str!("../../tests/fixtures/scxml/grader.scxml");
const INTERNAL_TRANSITION: &str =
    include_str!("../../tests/fixtures/scxml/internal_transition.scxml");
const INTERNAL_SEND: &str = include_str!("../../tests/fixtures/scxml/internal_send.scxml");

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
        let loaded =
            crate::load::load_text("imported.yaml", yaml.clone()).unwrap_or_else(|diagnostics| {
                panic!("{}\n{yaml}", crate::diagnostic::render_all(&diagnostics))
            });
        let machine = Arc::new(
            crate::compile::compile(&loaded).unwrap_or_else(|diagnostics| {
                panic!("{}\n{yaml}", crate::diagnostic::render_all(&diagnostics))
            }),
        );
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
            self.machine.state(outcome.final_state).id.to_string(),
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

#[test]
fn refuses_foreach() {
    assert_error(
        &document(
            "<transition event=\"e\">\n<foreach array=\"x\" item=\"i\"><log expr=\"i\"/></foreach>\n</transition>",
        ),
        "foreach",
        5,
        "no loops",
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
            "<invoke> cannot be imported",
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
            "<onentry><assign location=\"x.y\" expr=\"1\"/></onentry>",
            "assign",
            4,
            "only a whole <data> variable",
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
