//! The `pi` binary, run as a user would: one-shot modes, help, errors, a loopback
//! OpenAI-compatible server, and `pi chat` driven through stdin.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The binary with an empty environment: no API keys, no colours, the offline demo.
fn pi() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pi"));
    command.env_clear().stdin(Stdio::null());
    command
}

fn run(args: &[&str]) -> Output {
    pi().args(args).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

const README_QUESTION: &str = "What's the weather in Shanghai and Beijing?";

#[test]
fn one_shot_demo_streams_an_answer_that_calls_the_weather_tool_for_both_cities() {
    let output = run(&[README_QUESTION]);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(text(&output.stderr), "");
    let stdout = text(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("(offline demo on the faux provider"), "{stdout}");
    let shanghai = lines.iter().position(|l| *l == r#"→ get_weather({"location":"Shanghai"})"#).unwrap();
    let beijing = lines.iter().position(|l| *l == r#"→ get_weather({"location":"Beijing"})"#).unwrap();
    // Both calls start before either result: they run in parallel.
    let first_result = lines.iter().position(|l| l.starts_with("← get_weather: ")).unwrap();
    assert!(shanghai < first_result && beijing < first_result, "{stdout}");
    assert!(lines.iter().any(|l| l.starts_with("← get_weather: Shanghai: ") && l.contains(" °C, ")), "{stdout}");
    assert!(lines.iter().any(|l| l.starts_with("← get_weather: Beijing: ")), "{stdout}");
    assert!(stdout.contains("Here is what the tools report:\n- Shanghai: "), "{stdout}");
    let summary = lines.last().unwrap();
    assert!(summary.starts_with("[stop · 2 turns · tokens: "), "{summary}");
    assert!(!stdout.contains('\u{1b}'), "no colour codes on a pipe: {stdout}");
}

#[test]
fn one_shot_demo_uses_the_calculator_and_the_clock() {
    let output = run(&["What is 12 * (3 + 4), and what time is it in Tokyo?"]);
    assert!(output.status.success(), "{output:?}");
    let stdout = text(&output.stdout);
    assert!(stdout.contains("← calculate: 12 * (3 + 4) = 84\n"), "{stdout}");
    assert!(stdout.contains(r#"→ get_time({"location":"Tokyo"})"#), "{stdout}");
    assert!(stdout.contains("(UTC+09:00)"), "{stdout}");
    let output = run(&["Tell me a joke"]);
    let stdout = text(&output.stdout);
    assert!(!stdout.contains('→') && stdout.contains("[stop · 1 turn · "), "{stdout}");
}

#[test]
fn colours_follow_clicolor_force_and_no_color() {
    let forced = pi().env("CLICOLOR_FORCE", "1").arg(README_QUESTION).output().unwrap();
    let stdout = text(&forced.stdout);
    // Thinking is dimmed, tool calls coloured.
    assert!(stdout.contains("\u{1b}[2mTo answer"), "{stdout:?}");
    assert!(stdout.contains("\u{1b}[36m→ get_weather("), "{stdout:?}");
    let plain = pi().env("CLICOLOR_FORCE", "1").env("NO_COLOR", "1").arg(README_QUESTION).output().unwrap();
    assert!(!text(&plain.stdout).contains('\u{1b}'));
    let json = pi().env("CLICOLOR_FORCE", "1").args(["--json", README_QUESTION]).output().unwrap();
    assert!(!text(&json.stdout).contains("\\u001b"), "JSON is never coloured");
}

const README_EVENTS: &str = r#"[agent_start]
[turn_start]
[message_start] role=user
[message_end] role=user
[message_start] role=assistant
[message_update][thinking_start]
To answer I need to check the weather in Shanghai and Beijing: 2 independent tool calls, so I'll make them in parallel.
[message_update][thinking_end]
[message_update][text_start]
Let me check the weather in Shanghai and Beijing.
[message_update][text_end]
[message_update][toolcall_start]
{"location":"Shanghai"}
[message_update][toolcall_end] get_weather({"location":"Shanghai"})
[message_update][toolcall_start]
{"location":"Beijing"}
[message_update][toolcall_end] get_weather({"location":"Beijing"})
[message_end] role=assistant stopReason=toolUse
[tool_execution_start] get_weather({"location":"Shanghai"})
[tool_execution_start] get_weather({"location":"Beijing"})
[tool_execution_end] get_weather isError=false: Shanghai: -5 °C, overcast, humidity 87%, wind 29 km/h
[tool_execution_end] get_weather isError=false: Beijing: 4 °C, fog, humidity 65%, wind 17 km/h
[message_start] role=toolResult
[message_end] role=toolResult
[message_start] role=toolResult
[message_end] role=toolResult
[turn_end] stopReason=toolUse toolResults=2
[turn_start]
[message_start] role=assistant
[message_update][text_start]
Here is what the tools report:
- Shanghai: -5 °C, overcast, humidity 87%, wind 29 km/h
- Beijing: 4 °C, fog, humidity 65%, wind 17 km/h

Beijing is 9 °C warmer than Shanghai.

(Offline demo: the weather numbers are made up.)
[message_update][text_end]
[message_end] role=assistant stopReason=stop
[turn_end] stopReason=stop toolResults=0
[agent_end] messages=5
"#;

#[test]
fn events_mode_prints_one_line_per_event_with_deltas_inline() {
    let output = run(&["--events", README_QUESTION]);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(text(&output.stdout), README_EVENTS);
    assert!(text(&output.stderr).starts_with("(offline demo"), "the notice keeps stdout to events");
}

#[test]
fn json_mode_prints_every_agent_event_as_one_json_line() {
    let output = run(&["--json", README_QUESTION]);
    assert!(output.status.success(), "{output:?}");
    let stdout = text(&output.stdout);
    let events: Vec<pi_types::AgentEvent> = stdout
        .lines()
        .map(|line| {
            let event: pi_types::AgentEvent = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            // Unnormalized: the line is the event's wire JSON, field for field.
            assert_eq!(serde_json::to_string(&event).unwrap(), line);
            event
        })
        .collect();
    assert_eq!(events.first().map(|e| e.type_name()), Some("agent_start"));
    assert_eq!(events.last().map(|e| e.type_name()), Some("agent_end"));
    let calls: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            pi_types::AgentEvent::ToolExecutionStart { args, .. } => Some(args["location"].to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(calls, [r#""Shanghai""#, r#""Beijing""#]);
    assert!(events.iter().any(|e| e.type_name() == "message_update"));
}

#[test]
fn help_goes_to_stdout_with_exit_zero() {
    for args in [&["--help"][..], &["help"], &["-h"], &["help", "chat"], &["chat", "--help"]] {
        let output = run(args);
        assert!(output.status.success(), "{args:?}: {output:?}");
        assert_eq!(text(&output.stderr), "", "{args:?}");
        let stdout = text(&output.stdout);
        assert!(stdout.contains("Usage: pi"), "{args:?}: {stdout}");
    }
    let help = text(&run(&["--help"]).stdout);
    for option in
        ["--provider", "--model", "--base-url", "--api", "--thinking", "--system", "--events", "--json", "chat"]
    {
        assert!(help.contains(option), "{option}");
    }
}

#[test]
fn a_command_word_with_words_that_do_not_fit_it_is_one_line_not_a_prompt() {
    fails_with(
        pi().args(["models", "anthropic"]),
        2,
        "`pi models` does not take `anthropic`: did you mean `pi models --provider anthropic`? For a prompt that \
         starts with `models`, put `--` first: `pi -- models anthropic`",
    );
    fails_with(
        pi().args(["help", "me", "with", "the", "weather", "in", "Oslo"]),
        2,
        "`pi help` does not take `me with the weather in Oslo`: see `pi help --help`. For a prompt that starts \
         with `help`, put `--` first: `pi -- help me with the weather in Oslo`",
    );
    // After `--`, and with the command word later, the words are the prompt.
    for (args, expected) in [
        (&["--", "help", "me", "with", "the", "weather", "in", "Oslo"][..], r#"→ get_weather({"location":"Oslo"})"#),
        (&["--", "models", "compute", "12*3"], "← calculate: 12*3 = 36"),
        (&["--", "chat"], "[stop · 1 turn · "),
    ] {
        let output = run(args);
        assert!(output.status.success(), "{args:?}: {output:?}");
        let stdout = text(&output.stdout);
        assert!(stdout.contains(expected), "{args:?}: {stdout}");
    }
    let help = text(&run(&["--help"]).stdout);
    assert!(help.contains("Commands and prompts: a first word naming a command"), "{help}");
    assert!(help.contains("2 bad\narguments (unknown option, provider, model or API)"), "{help}");
}

#[test]
fn a_command_missing_its_subcommand_prints_help_to_stderr_and_exits_2() {
    let output = run(&["proxy"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert_eq!(text(&output.stdout), "");
    let stderr = text(&output.stderr);
    assert!(stderr.contains("Usage: pi proxy") && stderr.contains("serve"), "{stderr}");
    fails_with(
        pi().arg("login"),
        2,
        "the following required arguments were not provided: <PROVIDER> (see `pi --help`)",
    );
}

/// Run and expect a failure: non-zero exit, nothing on stdout, exactly `line` on stderr.
fn fails_with(command: &mut Command, code: i32, line: &str) {
    let output = command.output().unwrap();
    assert_eq!(output.status.code(), Some(code), "{output:?}");
    assert_eq!(text(&output.stdout), "", "{output:?}");
    assert_eq!(text(&output.stderr), format!("pi: {line}\n"));
}

#[test]
fn errors_are_one_line_on_stderr_with_nothing_on_stdout() {
    let key = "missing credentials for provider `openai`: run `pi login openai`, or set OPENAI_API_KEY";
    fails_with(pi().args(["--provider", "openai", "hi"]), 1, key);
    // An explicitly named model never falls back to the demo.
    fails_with(pi().args(["--model", "gpt-4.1-mini", "hi"]), 1, key);
    fails_with(
        pi().args(["--provider", "anthropic", "hi"]),
        1,
        "missing credentials for provider `anthropic`: run `pi login anthropic`, or set ANTHROPIC_AUTH_TOKEN or \
         ANTHROPIC_OAUTH_TOKEN or ANTHROPIC_API_KEY",
    );
    fails_with(
        pi().args(["--provider", "nope", "hi"]),
        2,
        "unknown provider `nope` (`pi models` lists the 43 built-in providers; `faux` is the offline demo; use \
         --base-url for another server)",
    );
    fails_with(
        pi().args(["--provider", "openai-codex", "hi"]).env("PI_AUTH_FILE", "/nonexistent/pi-auth.json"),
        1,
        "not signed in to provider `openai-codex`: run `pi login openai-codex`",
    );
    fails_with(pi().args(["login", "nope"]), 2, "unknown provider `nope` (`pi models` lists them)");
    fails_with(
        pi().args(["--provider", "openai", "--model", "gpt-nope", "hi"]).env("OPENAI_API_KEY", "sk-test"),
        2,
        "unknown model `gpt-nope` for provider `openai`",
    );
    fails_with(
        pi().args(["--model", "gpt-nope", "hi"]),
        2,
        "unknown model `gpt-nope` (no provider lists it; name one with --provider, or a server with --base-url)",
    );
    fails_with(
        pi().args(["--base-url", "http://127.0.0.1:1/v1", "--model", "m", "--api", "nope", "hi"]),
        2,
        "unknown API `nope`; choose one of openai-completions, openai-responses, anthropic-messages, \
         google-generative-ai, google-vertex, bedrock-converse-stream, azure-openai-responses, mistral-conversations, \
         openai-codex-responses, pi-messages",
    );
    fails_with(
        pi().args(["models", "--provider", "nope"]),
        2,
        "unknown provider `nope` (`pi models` lists the 43 built-in providers)",
    );
    fails_with(
        pi().args(["--provider", "faux", "--model", "faux-9", "hi"]),
        2,
        "unknown model `faux-9` for provider `faux` (it has faux-1)",
    );
    // Without PI_API_KEY nothing is sent: the reference's adapters need a key too.
    fails_with(
        pi().args(["--base-url", "http://127.0.0.1:1/v1", "--model", "m", "hi"]),
        1,
        "missing API key for the server at http://127.0.0.1:1/v1: set PI_API_KEY (a server that checks no key accepts \
         any value, e.g. PI_API_KEY=none)",
    );
    fails_with(pi().args(["--nope", "hi"]), 2, "unexpected argument '--nope' found (see `pi --help`)");
    fails_with(
        pi().args(["--thinking", "huge", "hi"]),
        2,
        "invalid value 'huge' for '--thinking <LEVEL>': expected one of off, minimal, low, medium, high, xhigh, max \
         (see `pi --help`)",
    );
    fails_with(&mut pi(), 2, "a PROMPT is required (see `pi --help`; `pi chat` starts a session)");
    fails_with(
        pi().args(["--base-url", "http://127.0.0.1:1/v1", "hi"]),
        2,
        "--base-url needs --model (the model id the server serves)",
    );
}

#[cfg(unix)]
#[test]
fn non_utf8_arguments_are_an_error_not_a_panic() {
    use std::os::unix::ffi::OsStrExt;
    let arg = std::ffi::OsStr::from_bytes(b"caf\xe9");
    fails_with(pi().arg(arg), 2, "invalid UTF-8 was detected in one or more arguments (see `pi --help`)");
}

#[test]
fn an_unreachable_server_is_one_clear_line_at_once() {
    // A port that was just free: nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/v1");
    // A refused connection is not retried, even with retries left: one line, no retry lines.
    for retries in ["0", "3"] {
        let output = pi()
            .args(["--retries", retries, "--base-url", &url, "--model", "m", "hi"])
            .env("PI_API_KEY", "none")
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        assert_eq!(text(&output.stdout), "");
        let stderr = text(&output.stderr);
        assert!(stderr.starts_with(&format!("pi: cannot reach {url}: Connection refused")), "{stderr}");
        assert!(!stderr.contains("Connection error.") && stderr.lines().count() == 1, "{stderr}");
    }
}

#[test]
fn a_dropped_connection_is_retried_in_the_words_of_the_final_error() {
    // A server that accepts and closes every connection: plausibly transient, so retried.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            drop(stream);
        }
    });
    let output = pi()
        .args(["--retries", "1", "--base-url", &url, "--model", "m", "hi"])
        .env("PI_API_KEY", "none")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = text(&output.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    let reach = format!("pi: cannot reach {url}: ");
    assert!(lines[0].starts_with(&reach) && lines[0].ends_with("; retrying in 2 s (attempt 1 of 1)"), "{stderr}");
    assert!(lines[1].starts_with(&reach) && !stderr.contains("Connection error."), "{stderr}");
}

/// One recorded request: request line, headers, body.
struct Request {
    head: String,
    body: String,
}

fn read_request(stream: &mut TcpStream) -> Option<Request> {
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let length = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned()))
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Request { head, body: String::from_utf8_lossy(&body).into_owned() })
}

fn chunk(delta: &str, finish: &str) -> String {
    format!(
        "data: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"test-model\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
    )
}

/// A loopback server speaking the OpenAI chat-completions SSE format: the first request gets
/// a tool call, the next (with the tool result) a text answer. Serves at most `limit`
/// requests and reports each on the channel.
fn completions_server(limit: usize) -> (String, mpsc::Receiver<Request>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(limit) {
            let Ok(mut stream) = stream else { return };
            let Some(request) = read_request(&mut stream) else { return };
            let events = if request.body.contains("\"role\":\"tool\"") {
                [
                    chunk(r#"{"role":"assistant","content":"Oslo is "}"#, "null"),
                    chunk(r#"{"content":"cold today."}"#, "null"),
                    chunk("{}", r#""stop""#),
                ]
                .concat()
            } else {
                [
                    chunk(r#"{"role":"assistant","content":"Checking."}"#, "null"),
                    chunk(
                        r#"{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"location\":"}}]}"#,
                        "null",
                    ),
                    chunk(r#"{"tool_calls":[{"index":0,"function":{"arguments":"\"Oslo\"}"}}]}"#, "null"),
                    chunk("{}", r#""tool_calls""#),
                ]
                .concat()
            };
            let usage = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"test-model\",\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":3,\"total_tokens\":13}}\n\n";
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n{events}{usage}data: [DONE]\n\n"
            );
            let _ = stream.write_all(response.as_bytes());
            let _ = stream.flush();
            let _ = tx.send(request);
        }
    });
    (url, rx)
}

/// `pi login groq` (a provider with no sign-in flow) keeps the key it is given in the auth file; a run with no key in the
/// environment then sends that key, and `pi auth` says where it comes from, never what it is.
#[test]
fn a_key_stored_by_pi_login_is_what_a_run_sends() {
    let dir = std::env::temp_dir().join(format!("pi-cli-login-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let auth = dir.join("auth.json");
    let mut login = pi()
        .args(["login", "groq"])
        .env("PI_AUTH_FILE", &auth)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    login.stdin.take().unwrap().write_all(b"sk-stored-0123\n").unwrap();
    let output = login.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = text(&output.stdout);
    assert!(stdout.contains("Stored the API key of groq; saved in "), "{stdout}");
    assert!(!stdout.contains("sk-stored-0123"), "{stdout}");

    let (url, requests) = completions_server(2);
    let output = pi()
        .args(["--provider", "groq", "--model", "openai/gpt-oss-20b", "--api", "openai-completions"])
        .args(["--base-url", &url, "--demo-tools", "Weather in Oslo?"])
        .env("PI_AUTH_FILE", &auth)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(text(&output.stdout).contains("Oslo is cold today."), "{output:?}");
    let first = requests.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(first.head.to_ascii_lowercase().contains("\r\nauthorization: bearer sk-stored-0123\r\n"), "{}", first.head);

    let output = pi().arg("auth").env("PI_AUTH_FILE", &auth).output().unwrap();
    let stdout = text(&output.stdout);
    assert!(
        stdout.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["groq", "stored", "API", "key"]),
        "{stdout}"
    );
    assert!(!stdout.contains("sk-stored-0123"), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn base_url_talks_to_an_openai_compatible_server() {
    let (url, requests) = completions_server(2);
    let output = pi()
        .args(["--base-url", &url, "--model", "test-model", "--demo-tools", "Weather in Oslo?"])
        .env("PI_API_KEY", "sk-local-0123")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(text(&output.stderr), "");
    let stdout = text(&output.stdout);
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            "Checking.",
            r#"→ get_weather({"location":"Oslo"})"#,
            // The demo tool's stable made-up numbers for Oslo.
            "← get_weather: Oslo: 17 °C, sunny, humidity 70%, wind 2 km/h",
            "Oslo is cold today.",
            "[stop · 2 turns · tokens: 20 in, 6 out, 26 total]",
        ]
    );
    let first = requests.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(first.head.starts_with("POST /v1/chat/completions HTTP/1.1\r\n"), "{}", first.head);
    assert!(first.head.to_ascii_lowercase().contains("\r\nauthorization: bearer sk-local-0123\r\n"), "{}", first.head);
    assert!(
        first.body.contains(r#""model":"test-model""#) && first.body.contains(r#""stream":true"#),
        "{}",
        first.body
    );
    assert!(first.body.contains(r#""name":"get_weather""#), "the demo tools are declared: {}", first.body);
    let second = requests.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(second.body.contains(r#""tool_call_id":"call_a""#), "{}", second.body);
}

#[test]
fn a_real_model_gets_the_demo_tools_only_when_asked() {
    let (url, requests) = completions_server(2);
    let output = pi()
        .args(["--base-url", &url, "--model", "test-model", "Weather in Oslo?"])
        .env("PI_API_KEY", "none")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let first = requests.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(!first.body.contains("get_weather") && !first.body.contains(r#""tools""#), "{}", first.body);
    // The server's call of a tool the agent does not have gets an error result, not made-up weather.
    let stdout = text(&output.stdout);
    assert!(!stdout.contains("°C"), "{stdout}");
}

#[test]
fn env_proxy_sends_requests_through_http_proxy_only_when_asked() {
    // The loopback server plays an HTTP proxy that answers itself; the upstream is a port where
    // nothing listens, so a request that does not go through the proxy fails.
    let (proxy_url, requests) = completions_server(2);
    let proxy = proxy_url.trim_end_matches("/v1");
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let upstream = format!("http://127.0.0.1:{port}/v1");
    let pi_with = |flag: bool, no_proxy: &str| {
        let mut command = pi();
        if flag {
            command.arg("--env-proxy");
        }
        command
            .args(["--retries", "0", "--base-url", &upstream, "--model", "test-model", "Weather in Oslo?"])
            .env("PI_API_KEY", "none")
            .env("HTTP_PROXY", proxy)
            .env("NO_PROXY", no_proxy)
            .output()
            .unwrap()
    };
    for (flag, no_proxy) in [(false, ""), (true, "127.0.0.1")] {
        let output = pi_with(flag, no_proxy);
        assert_eq!(output.status.code(), Some(1), "flag {flag}, NO_PROXY {no_proxy:?}: {output:?}");
        assert!(text(&output.stderr).starts_with(&format!("pi: cannot reach {upstream}")), "{output:?}");
        assert!(requests.try_recv().is_err(), "flag {flag}, NO_PROXY {no_proxy:?}: the proxy was used");
    }
    let output = pi_with(true, "");
    assert!(output.status.success(), "{output:?}");
    assert!(text(&output.stdout).contains("Oslo is cold today."), "{output:?}");
    let first = requests.recv_timeout(Duration::from_secs(10)).unwrap();
    let line = format!("POST {upstream}/chat/completions HTTP/1.1\r\n");
    assert!(first.head.starts_with(&line), "absolute-form request line to the proxy: {}", first.head);
}

fn chat(args: &[&str], input: &str) -> Output {
    let mut child = pi()
        .arg("chat")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn chat_sends_a_line_typed_during_a_run_as_steering() {
    let output = chat(&["--events"], "What's the weather in Shanghai?\nAlso Tokyo weather please\n");
    assert!(output.status.success(), "{output:?}");
    let stdout = text(&output.stdout);
    assert!(stdout.contains("(steering: read after the current turn)\n"), "{stdout}");
    // One run, two user messages: the steering message joined the running agent.
    assert_eq!(stdout.matches("[agent_start]").count(), 1, "{stdout}");
    assert_eq!(stdout.matches("[message_start] role=user").count(), 2, "{stdout}");
    assert!(stdout.contains(r#"[tool_execution_start] get_weather({"location":"Shanghai"})"#), "{stdout}");
    assert!(stdout.contains(r#"[tool_execution_start] get_weather({"location":"Tokyo"})"#), "{stdout}");
    assert!(stdout.contains("- Shanghai: ") && stdout.contains("- Tokyo: "), "{stdout}");
    // Delivered at the run's first steering poll or after its first turn, depending on when
    // the line arrives: 6 or 7 new messages.
    assert!(stdout.ends_with("[agent_end] messages=6\n") || stdout.ends_with("[agent_end] messages=7\n"), "{stdout}");
}

#[test]
fn chat_abort_stops_the_run_and_the_session_goes_on() {
    let input = "What's the weather in Shanghai?\n/abort\n/reset\n/model\n/tools\n/model openai/gpt-4.1-mini\n\
                 /model faux/faux-1\nWhat is 6*7?\n/followup\n/nope\n";
    let output = chat(&["--events"], input);
    assert!(output.status.success(), "{output:?}");
    let stdout = text(&output.stdout);
    assert!(stdout.contains("[turn_end] stopReason=aborted toolResults=0\n"), "{stdout}");
    assert!(
        stdout.contains("(aborted)\n(conversation cleared)\nmodel: faux/faux-1\ntools:\n  get_weather: "),
        "{stdout}"
    );
    assert!(stdout.contains("[tool_execution_end] calculate isError=false: 6*7 = 42\n"), "{stdout}");
    assert!(stdout.contains("usage: /followup TEXT\n"), "{stdout}");
    assert!(
        stdout.contains(
            "error: missing credentials for provider `openai`: run `pi login openai`, or set OPENAI_API_KEY\n(model: \
             faux/faux-1)\n"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("unknown command /nope (/help lists them)\n"), "{stdout}");
    assert_eq!(stdout.matches("[agent_start]").count(), 2, "{stdout}");
    // After /reset the second run starts from an empty conversation.
    assert!(stdout.ends_with("[agent_end] messages=4\n"), "{stdout}");
}

#[test]
fn chat_followup_runs_after_the_answer() {
    let output = chat(&[], "What is 2+2?\n/followup And 3*3?\n");
    assert!(output.status.success(), "{output:?}");
    let stdout = text(&output.stdout);
    assert!(stdout.contains("(follow-up queued)\n"), "{stdout}");
    assert!(stdout.contains("← calculate: 2+2 = 4\n"), "{stdout}");
    assert!(stdout.contains("↳ And 3*3?\n"), "{stdout}");
    assert!(stdout.contains("← calculate: 3*3 = 9\n"), "{stdout}");
}

#[test]
fn chat_json_keeps_stdout_to_events() {
    let output = chat(&["--json"], "What is 2+2?\nand 3*3?\n/tools\n");
    assert!(output.status.success(), "{output:?}");
    let stdout = text(&output.stdout);
    for line in stdout.lines() {
        serde_json::from_str::<pi_types::AgentEvent>(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    }
    assert!(stdout.starts_with(r#"{"type":"agent_start"}"#), "{stdout}");
    let stderr = text(&output.stderr);
    assert!(stderr.contains("(steering: read after the current turn)\ntools:\n"), "{stderr}");
}

#[cfg(unix)]
#[test]
fn chat_ctrl_c_aborts_the_run_and_a_second_one_exits() {
    let mut child = pi()
        .args(["chat", "--events"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Safety net, not a timing assertion: a session that never exits fails the test
    // (its stdout closes) instead of hanging it.
    let pid = child.id().to_string();
    let reaped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watchdog_reaped = std::sync::Arc::clone(&reaped);
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(120));
        if !watchdog_reaped.load(std::sync::atomic::Ordering::SeqCst) {
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
        }
    });
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"What's the weather in Shanghai and Beijing?\n").unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let interrupt = |pid: u32| {
        let status = Command::new("kill").args(["-INT", &pid.to_string()]).status().unwrap();
        assert!(status.success());
    };
    let mut seen = String::new();
    let mut wait_for = |needle: &str, seen: &mut String| loop {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "no `{needle}` in {seen}");
        seen.push_str(&line);
        if line.starts_with(needle) {
            return;
        }
    };
    wait_for("[message_start] role=assistant", &mut seen);
    interrupt(child.id());
    wait_for("(aborting — Ctrl-C again to exit)", &mut seen);
    wait_for("(aborted)", &mut seen);
    interrupt(child.id());
    let status = child.wait().unwrap();
    reaped.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(status.success(), "{status:?}: {seen}");
    assert!(seen.contains("stopReason=aborted"), "{seen}");
    drop(stdin);
}

/// A `pi proxy serve` child, killed if a test fails before stopping it.
struct ProxyServer {
    child: std::process::Child,
    url: String,
}

impl Drop for ProxyServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const PROXY_TOKEN: &str = "test-token-0123456789";

fn proxy_server() -> ProxyServer {
    let (server, first) = start_proxy(&["--with-demo"], &[]);
    // No keys in the environment: only the demo can answer.
    assert!(first.trim_end().ends_with("(1 token; providers with keys: faux; 43 more without keys)"), "{first}");
    server
}

/// `pi proxy serve` with more arguments and environment; the server and its first line.
fn start_proxy(args: &[&str], env: &[(&str, &str)]) -> (ProxyServer, String) {
    let mut child = pi()
        .args(["proxy", "serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .env("PI_PROXY_TOKEN", PROXY_TOKEN)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.starts_with("pi proxy listening on http://127.0.0.1:"), "{first}");
    let url = first.split_whitespace().nth(4).unwrap().to_owned();
    (ProxyServer { child, url }, first)
}

#[test]
fn a_model_only_the_proxy_defines_is_found_in_its_list() {
    let (upstream, requests) = completions_server(2);
    let config = serde_json::json!({
        "providers": ["openai"],
        "customProviders": [{"id": "house", "apiKeyEnv": "HOUSE_KEY", "models": [
            {"id": "house-model", "api": "openai-completions", "baseUrl": upstream}
        ]}]
    });
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("pi-cli-served-models.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let (server, _) = start_proxy(&["--config", path.to_str().unwrap()], &[("HOUSE_KEY", "sk-house-0123")]);
    let url = server.url.as_str();

    let output = pi()
        .args(["--proxy", url, "--token", PROXY_TOKEN, "--model", "house-model", "--demo-tools", "Weather in Oslo?"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = text(&output.stdout);
    assert!(stdout.contains("← get_weather: Oslo: ") && stdout.contains("Oslo is cold today.\n"), "{stdout}");
    // The server's key went upstream, never the client's (it has none).
    let first = requests.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(first.head.to_ascii_lowercase().contains("\r\nauthorization: bearer sk-house-0123\r\n"), "{}", first.head);

    let listing =
        pi().args(["models", "--proxy", url, "--token", PROXY_TOKEN, "--provider", "house"]).output().unwrap();
    let stdout = text(&listing.stdout);
    assert!(listing.status.success(), "{listing:?}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(lines[0].starts_with("house/house-model  openai-completions  "), "{stdout}");
    assert_eq!(lines[1], format!("1 model from 1 provider, served by the proxy at {url}"));

    fails_with(
        pi().args(["--proxy", url, "--token", PROXY_TOKEN, "--model", "nope-model", "hi"]),
        2,
        &format!(
            "unknown model `nope-model`: neither the built-in catalog nor the proxy at {url} has it (`pi models \
             --proxy {url}` lists what the proxy serves)"
        ),
    );
    // The proxy has no OPENAI_API_KEY: said as the proxy's, not as ours.
    fails_with(
        pi().args(["--proxy", url, "--token", PROXY_TOKEN, "--model", "gpt-4.1-mini", "hi"]),
        1,
        &format!(
            "the proxy at {url} has no API key for provider `openai` (the key is set where the proxy runs, not here)"
        ),
    );
    fails_with(
        pi().args(["models", "--proxy", url, "--token", "wrong-token-0123456789"]),
        1,
        &format!("cannot list the models of the proxy at {url}: Proxy error: Invalid token"),
    );
}

#[test]
fn proxy_client_streams_through_pi_proxy_serve() {
    let mut server = proxy_server();
    // Through the proxy the events are exactly those of the local run.
    let output = pi()
        .args(["--proxy", &server.url, "--token", PROXY_TOKEN, "--provider", "faux", "--events", README_QUESTION])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(text(&output.stdout), README_EVENTS);
    assert_eq!(text(&output.stderr), "", "no offline-demo notice: the demo runs on the proxy");
    // The token may come from the environment.
    let output = pi()
        .args(["--proxy", &server.url, "--provider", "faux", "What is 6*7?"])
        .env("PI_PROXY_TOKEN", PROXY_TOKEN)
        .output()
        .unwrap();
    assert!(text(&output.stdout).contains("← calculate: 6*7 = 42\n"), "{output:?}");
    fails_with(
        pi().args(["--proxy", &server.url, "--token", "wrong-token-0123456789", "--provider", "faux", "hi"]),
        1,
        "Proxy error: Invalid token",
    );
    fails_with(
        pi().args(["--proxy", &server.url, "hi"]).env("PI_PROXY_TOKEN", PROXY_TOKEN),
        2,
        "--proxy needs the model: --provider and/or --model",
    );
    // Ctrl-C stops the server gracefully.
    let status = Command::new("kill").args(["-INT", &server.child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let exit = server.child.wait().unwrap();
    assert!(exit.success(), "{exit:?}");
}

#[test]
fn proxy_errors_are_one_line() {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}");
    // Refused: reported at once, without retries.
    let output = pi().args(["--proxy", &url, "--token", PROXY_TOKEN, "--provider", "faux", "hi"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert_eq!(text(&output.stdout), "");
    let stderr = text(&output.stderr);
    assert!(
        stderr.starts_with(&format!("pi: cannot reach the proxy at {url}: ")) && stderr.lines().count() == 1,
        "{stderr}"
    );
    fails_with(
        pi().args(["--proxy", &url, "--provider", "faux", "hi"]),
        2,
        "--proxy needs --token TOKEN (or PI_PROXY_TOKEN)",
    );
    fails_with(pi().args(["--token", PROXY_TOKEN, "hi"]), 2, "--token needs --proxy URL");
    fails_with(
        pi().args(["proxy", "serve", "--listen", "127.0.0.1:0"]),
        1,
        "proxy configuration: no bearer tokens: set PI_PROXY_TOKEN, PI_PROXY_TOKENS (id:secret,...) or tokens in the \
         config file",
    );
    fails_with(
        pi().args(["proxy", "serve", "--listen", "nowhere"]).env("PI_PROXY_TOKEN", PROXY_TOKEN),
        1,
        "cannot listen on nowhere: invalid socket address",
    );
}

/// The roles of a session file's lines.
fn session_roles(path: &std::path::Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap()["role"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_session_file_records_the_conversation_and_resumes_it() {
    let dir = std::env::temp_dir().join(format!("pi-cli-session-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("chat.jsonl");
    let path = file.to_str().unwrap();

    let output = run(&["--session", path, "What is 12 * (3 + 4)?"]);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(session_roles(&file), ["system", "user", "assistant", "toolResult", "assistant"]);

    let output = run(&["--session", path, "Tell me a joke"]);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(text(&output.stderr), format!("pi: resumed 4 messages from {path}\n"));
    let roles = session_roles(&file);
    assert_eq!(roles.len(), 7, "{roles:?}");
    assert_eq!(roles[5..], ["user", "assistant"]);
    let last_user: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(&file).unwrap().lines().nth(5).unwrap()).unwrap();
    assert_eq!(last_user["content"][0]["text"], "Tell me a joke");

    let mut resumed_with_another_prompt = pi();
    resumed_with_another_prompt.args(["--session", path, "--system", "Be verbose.", "Hi"]);
    fails_with(
        &mut resumed_with_another_prompt,
        2,
        &format!(
            "{path}: --system differs from the session's system prompt; leave it out to resume, or use another file"
        ),
    );
    assert_eq!(session_roles(&file).len(), 7, "a refused resume writes nothing");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_closed_pipe_ends_the_listing_quietly_with_status_0() {
    // The reader closes its end before `pi` writes (`pi models | head -0`).
    let mut child = pi().arg("models").stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(text(&output.stderr), "");
}

#[test]
fn models_lists_the_offline_demo_under_its_provider_id() {
    let output = run(&["models", "--provider", "faux"]);
    assert!(output.status.success(), "{output:?}");
    let stdout = text(&output.stdout);
    assert!(stdout.starts_with("faux/faux-1 "), "{stdout}");
    assert!(stdout.ends_with("1 model from the offline demo (no key needed)\n"), "{stdout}");
    let json: serde_json::Value =
        serde_json::from_slice(&run(&["models", "--provider", "faux", "--json"]).stdout).unwrap();
    assert_eq!(json["faux"][0]["id"], "faux-1", "{json}");
}

#[test]
fn the_proxy_start_up_line_lists_the_providers_it_holds_keys_for() {
    let (_server, first) = start_proxy(&[], &[("MISTRAL_API_KEY", "sk-mistral-0123")]);
    assert!(first.contains("(1 token; providers with keys: mistral; 42 more without keys)"), "{first}");
}

/// A fresh folder named after `name` with a session file of one answered prompt (system, user,
/// assistant, tool result, assistant); the folder and the file.
fn recorded_session(name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("pi-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("chat.jsonl");
    assert!(run(&["--session", file.to_str().unwrap(), "What is 12 * (3 + 4)?"]).status.success());
    (dir, file)
}

#[test]
fn an_unanswered_last_prompt_is_named_and_continue_answers_it() {
    let (dir, file) = recorded_session("unanswered");
    let path = file.to_str().unwrap();
    // What a process killed mid-answer leaves: the system prompt and the prompt.
    let kept: String = std::fs::read_to_string(&file).unwrap().lines().take(2).map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, kept).unwrap();
    let output = chat(&["--session", path], "/continue\n");
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        text(&output.stderr),
        format!(
            "pi: resumed 1 message from {path}\npi: the last prompt in {path} has no answer (the run ended while \
             answering); /continue in `pi chat --session {path}` answers it\n"
        )
    );
    assert!(text(&output.stdout).contains("← calculate: 12 * (3 + 4) = 84"), "{output:?}");
    assert_eq!(session_roles(&file), ["system", "user", "assistant", "toolResult", "assistant"]);
    let output = chat(&["--session", path], "/continue\n");
    assert!(text(&output.stdout).contains("(nothing to continue: the last message is an answer)"), "{output:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn reset_keeps_the_old_session_file_and_says_where() {
    let (dir, file) = recorded_session("reset");
    let path = file.to_str().unwrap();
    let before = std::fs::read_to_string(&file).unwrap();
    let output = chat(&["--session", path], "/reset\nTell me a joke\n");
    assert!(output.status.success(), "{output:?}");
    let backup = format!("{path}.bak");
    assert!(
        text(&output.stdout).contains(&format!("(conversation cleared; the old one is in {backup})\n")),
        "{output:?}"
    );
    assert_eq!(std::fs::read_to_string(&backup).unwrap(), before);
    assert_eq!(session_roles(&file), ["system", "user", "assistant"]);
    // A second reset does not overwrite the first copy.
    let output = chat(&["--session", path], "/reset\n");
    assert!(text(&output.stdout).contains(&format!("the old one is in {path}.bak.2)")), "{output:?}");
    assert_eq!(std::fs::read_to_string(&backup).unwrap(), before);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The new sign-ins are behind `pi login`: each asks its first question before any request
/// (Copilot its enterprise domain, Radius its method) and a closed stdin cancels it, storing
/// nothing.
#[test]
fn login_asks_the_first_question_of_the_copilot_and_radius_sign_ins() {
    let auth = std::env::temp_dir().join(format!("pi-cli-login-{}.json", std::process::id()));
    for (provider, question) in [
        ("github-copilot", "GitHub Enterprise URL/domain (blank for github.com) (e.g. company.ghe.com)\n"),
        ("radius", "Sign in to Radius:\n  1. Sign in with browser (recommended)\n"),
    ] {
        let output = pi().args(["login", provider]).env("PI_AUTH_FILE", &auth).output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{output:?}");
        assert!(text(&output.stdout).starts_with(question), "{output:?}");
        assert_eq!(text(&output.stderr), "pi: Login cancelled\n");
    }
    assert!(!auth.exists());
}

/// `pi models --refresh` restores the models store's catalog (Radius' replaces the shipped
/// one); without a credential it goes to no network, and a provider without a live catalog is
/// a usage error.
#[test]
fn models_refresh_restores_the_stored_catalog() {
    let dir = std::env::temp_dir().join(format!("pi-cli-models-refresh-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let store = dir.join("models-store.json");
    let kept = serde_json::json!({"radius": {"checkedAt": 1, "models": [{
        "id": "kept", "name": "Kept", "api": "pi-messages", "provider": "radius", "baseUrl": "https://gw.example/v1",
        "reasoning": false, "input": ["text"], "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
        "contextWindow": 1000, "maxTokens": 100}]}});
    std::fs::write(&store, kept.to_string()).unwrap();
    let refresh = |provider: &str| {
        pi().args(["models", "--refresh", "--provider", provider])
            .env("PI_AUTH_FILE", dir.join("auth.json"))
            .env("PI_MODELS_STORE", &store)
            .output()
            .unwrap()
    };
    let output = refresh("radius");
    assert!(output.status.success(), "{output:?}");
    let lines: Vec<String> =
        text(&output.stdout).lines().map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")).collect();
    assert_eq!(lines, ["chat radius/kept pi-messages", "radius: 1 models"]);
    fails_with(
        pi().args(["models", "--refresh", "--provider", "mistral"]),
        2,
        "provider `mistral` has no live catalog to refresh",
    );
    let _ = std::fs::remove_dir_all(&dir);
}
