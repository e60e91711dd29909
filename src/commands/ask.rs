//! `kforge ask`: send one prompt to a provider and stream the answer, to check that a
//! provider works. The answer goes to stdout as it arrives; reasoning (dimmed on a
//! terminal), retries, usage, cost and latency go to stderr.

use std::io::{IsTerminal, Read, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::llm::error::secs;
use crate::llm::{ChatRequest, Completion, CostSource, LlmClient, LlmError, StreamEvent};

#[derive(clap::Args, Debug)]
pub struct AskArgs {
    /// The prompt; `-` reads it from stdin (so does leaving it out when stdin is a pipe).
    pub prompt: Option<String>,
    /// Provider name (a preset or `[llm.providers.NAME]`); default: `KFORGE_PROVIDER`,
    /// `[llm] default`, else the first preset whose key variable is set.
    #[arg(long)]
    pub provider: Option<String>,
    /// Model (default: `KFORGE_MODEL`, else the provider's `model`).
    #[arg(long)]
    pub model: Option<String>,
    /// System prompt.
    #[arg(long)]
    pub system: Option<String>,
    /// The most tokens the model may write in this one answer (its output limit; `run`'s
    /// `--max-tokens` is a budget for a whole session).
    #[arg(long, value_name = "N")]
    pub max_output_tokens: Option<u32>,
    /// Do not print the model's reasoning (it is still counted).
    #[arg(long)]
    pub no_reasoning: bool,
}

pub async fn run(args: AskArgs, config_file: Option<&Path>) -> anyhow::Result<ExitCode> {
    let config = Config::load(config_file)?;
    if args.provider.as_deref() == Some("manual") {
        let prompt_on_stdin = matches!(args.prompt.as_deref(), None | Some("-"));
        let prompt = read_prompt(args.prompt.as_deref())?;
        if !std::io::stdin().is_terminal() {
            // No terminal for an editor (a script, a pipe): the answer comes on stdin.
            if prompt_on_stdin {
                anyhow::bail!(
                    "the manual provider opens an editor, which needs a terminal; without one, pass \
                     the prompt as an argument and the answer on stdin \
                     (`kforge ask --provider manual \"PROMPT\" < answer.md`)"
                );
            }
            return answer_from_stdin();
        }
        return ask_yourself(&prompt, &config.tui.editor_command());
    }
    let provider = crate::llm::resolve(&config, args.provider.as_deref(), args.model.as_deref())?;
    let prompt = read_prompt(args.prompt.as_deref())?;
    let mut request = ChatRequest::prompt(prompt);
    request.system = args.system.clone();
    request.max_tokens = args.max_output_tokens;
    let client = LlmClient::new(provider)?;

    let cancel = CancellationToken::new();
    let on_ctrl_c = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_ctrl_c.cancel();
        }
    });

    let stderr_tty = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let mut printer = Printer {
        show_reasoning: !args.no_reasoning,
        dim: stderr_tty,
        ..Printer::default()
    };
    let result = client
        .complete(&request, &cancel, |ev| printer.on_event(ev))
        .await;
    printer.end();
    match result {
        Ok(completion) => {
            eprint!("{}", summary(&completion));
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            if let Some(partial) = error.partial() {
                eprint!("{}", summary(partial));
            }
            eprintln!("error: {error}");
            Ok(ExitCode::from(if matches!(error, LlmError::Cancelled) {
                130
            } else {
                1
            }))
        }
    }
}

/// The `manual` provider: the prompt opens in the editor above a marker line and what is
/// written below the marker is the answer, printed as a provider's would be.
fn ask_yourself(prompt: &str, editor: &str) -> anyhow::Result<ExitCode> {
    use crate::external_editor::{Edited, edit};
    use crate::protocol::manual::{answer_from, answer_template};
    eprintln!("manual provider: write the answer below the marker line in {editor}");
    let edited = match edit(editor, &answer_template(prompt), ".md")? {
        Edited::Text(text) => text,
        Edited::Failed(status) => {
            eprintln!("error: the editor `{editor}` exited with {status}: no answer");
            return Ok(ExitCode::from(1));
        }
    };
    match answer_from(&edited) {
        Some(answer) => {
            print_manual_answer(&answer);
            Ok(ExitCode::SUCCESS)
        }
        None => {
            eprintln!("error: nothing was written below the marker line: no answer");
            Ok(ExitCode::from(1))
        }
    }
}

/// The `manual` provider without a terminal: the answer is what stdin holds.
fn answer_from_stdin() -> anyhow::Result<ExitCode> {
    let mut answer = String::new();
    std::io::stdin()
        .read_to_string(&mut answer)
        .context("cannot read the answer from stdin")?;
    if answer.trim().is_empty() {
        eprintln!(
            "error: no answer: without a terminal the manual provider reads the answer from stdin, \
             which was empty"
        );
        return Ok(ExitCode::from(1));
    }
    print_manual_answer(&answer);
    Ok(ExitCode::SUCCESS)
}

fn print_manual_answer(answer: &str) {
    print!("{answer}");
    if !answer.ends_with('\n') {
        println!();
    }
    eprintln!(
        "--\nprovider manual (you), {} characters",
        answer.chars().count()
    );
}

fn read_prompt(arg: Option<&str>) -> anyhow::Result<String> {
    let from_stdin = match arg {
        Some("-") => true,
        Some(text) => return Ok(text.to_string()),
        None if !std::io::stdin().is_terminal() => true,
        None => anyhow::bail!("no prompt: pass it as an argument, or `-` to read it from stdin"),
    };
    let mut text = String::new();
    if from_stdin {
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the prompt from stdin")?;
    }
    if text.trim().is_empty() {
        anyhow::bail!("the prompt is empty");
    }
    Ok(text)
}

/// Writes the stream: text to stdout, reasoning and retries to stderr.
#[derive(Default)]
struct Printer {
    show_reasoning: bool,
    dim: bool,
    /// The last thing written to stderr was reasoning without a final newline.
    in_reasoning: bool,
    /// Text was written and its last character was not a newline.
    text_open: bool,
}

impl Printer {
    fn on_event(&mut self, ev: &StreamEvent) {
        match ev {
            StreamEvent::Reasoning(r) if self.show_reasoning => {
                let mut err = std::io::stderr();
                let _ = if self.dim {
                    write!(err, "\x1b[2m{r}\x1b[0m")
                } else {
                    write!(err, "{r}")
                };
                self.in_reasoning = !r.ends_with('\n');
            }
            StreamEvent::Text(t) => {
                self.close_reasoning();
                let mut out = std::io::stdout();
                let _ = out.write_all(t.as_bytes());
                let _ = out.flush();
                self.text_open = !t.ends_with('\n');
            }
            StreamEvent::Retrying {
                attempt,
                delay,
                reason,
            } => {
                self.close_reasoning();
                eprintln!("retrying (attempt {attempt}) in {}: {reason}", secs(*delay));
            }
            _ => {}
        }
    }

    fn close_reasoning(&mut self) {
        if self.in_reasoning {
            eprintln!();
            self.in_reasoning = false;
        }
    }

    fn end(&mut self) {
        self.close_reasoning();
        if self.text_open {
            println!();
            self.text_open = false;
        }
    }
}

/// The lines printed on stderr after the answer.
pub fn summary(c: &Completion) -> String {
    let u = &c.usage;
    let answered = match &c.response_model {
        Some(m) if *m != c.model => format!(" (answered by {m})"),
        _ => String::new(),
    };
    let cost = match &c.cost {
        Some(cost) => {
            let source = match cost.source {
                CostSource::Reported => "reported by the provider",
                CostSource::PriceTable => "from the price table",
                CostSource::Free => "free provider",
            };
            format!("${} ({source})", usd(cost.usd))
        }
        None if c.usage.total_tokens() == 0 && c.usage.reported_cost_usd.is_none() => {
            "unknown (the provider reported no usage)".to_string()
        }
        None => format!(
            "unknown (no price for `{}`: add [llm.prices.\"{}\"] to the config)",
            c.model, c.model
        ),
    };
    let ttft = c
        .time_to_first_token
        .map(secs)
        .unwrap_or_else(|| "-".into());
    let attempts = if c.attempts == 1 {
        "1 attempt".to_string()
    } else {
        format!("{} attempts", c.attempts)
    };
    let finish = c.finish_reason.as_ref().map(|f| f.as_str()).unwrap_or("-");
    format!(
        "--\nprovider {}, model {}{answered}\n\
         tokens: input {} (cached {}, cache write {}), output {} (reasoning {})\n\
         cost: {cost}\n\
         time to first token {ttft}, total {}, {attempts}, finish {finish}\n",
        c.provider,
        c.model,
        u.input_tokens,
        u.cached_input_tokens,
        u.cache_write_tokens,
        u.output_tokens,
        u.reasoning_tokens,
        secs(c.latency),
    )
}

/// Dollars with enough digits to show small amounts.
fn usd(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v < 0.01 {
        format!("{v:.6}")
    } else {
        format!("{v:.4}")
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::llm::{Cost, Usage};

    #[test]
    fn summary_shows_tokens_cost_and_times() {
        let mut c = Completion {
            provider: "deepseek".into(),
            model: "deepseek-chat".into(),
            usage: Usage {
                input_tokens: 1200,
                cached_input_tokens: 1000,
                output_tokens: 300,
                ..Usage::default()
            },
            cost: Some(Cost {
                usd: 0.000123,
                source: CostSource::PriceTable,
            }),
            latency: Duration::from_millis(3400),
            time_to_first_token: Some(Duration::from_millis(820)),
            attempts: 1,
            ..Completion::default()
        };
        let s = summary(&c);
        assert!(
            s.contains("provider deepseek, model deepseek-chat\n"),
            "{s}"
        );
        assert!(
            s.contains("input 1200 (cached 1000, cache write 0), output 300 (reasoning 0)"),
            "{s}"
        );
        assert!(s.contains("cost: $0.000123 (from the price table)"), "{s}");
        assert!(
            s.contains("time to first token 820 ms, total 3.4 s, 1 attempt"),
            "{s}"
        );
        c.cost = None;
        assert!(summary(&c).contains("cost: unknown (no price for `deepseek-chat`"));
    }
}
