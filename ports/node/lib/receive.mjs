// The receiving side: a receiver takes the mail of one session, through the
// inbound mode and the loop guard, into a context; the unlink comes only after.
import fs from "node:fs";
import { reason } from "./wire.mjs";
import { Folder, within } from "./disk.mjs";
import { frame } from "./frame.mjs";

export const REPEAT_MS = 10_000;
export const BURST_MS = 30_000;
export const BURST_CAP = 8;

// PI_POST_INBOUND and PI_POST_RESUME: read stripped and in any case; anything unknown is the default.
const mode = (value) => String(value ?? "").trim().toLowerCase();
export const refusesInbound = (value) => mode(value) === "refuse"; // ask, with no one to ask, accepts
export const stagesResumed = (value) => mode(value) === "stage";

// Per sender, over what entered the context: no body again within 10 s of
// its last entry, no 9th message within 30 s.
export class LoopGuard {
  constructor() {
    this.bySender = new Map();
  }
  static senderOf(message) {
    return message.from.address ?? `name:${message.from.name}`;
  }
  judge(message, now) {
    const seen = this.bySender.get(LoopGuard.senderOf(message)) ?? [];
    if (seen.some((s) => s.body === message.body && now - s.at < REPEAT_MS)) {
      return reason("loop_guard", `the same body again from this sender within ${REPEAT_MS / 1000} s`, { rule: "duplicate", window_ms: REPEAT_MS });
    }
    if (seen.filter((s) => now - s.at < BURST_MS).length >= BURST_CAP) {
      return reason("loop_guard", `more than ${BURST_CAP} messages from this sender within ${BURST_MS / 1000} s`, { rule: "rate", limit: BURST_CAP, window_ms: BURST_MS });
    }
    return null;
  }
  admit(message, now) {
    const key = LoopGuard.senderOf(message);
    const seen = (this.bySender.get(key) ?? []).filter((s) => now - s.at < BURST_MS);
    seen.push({ body: message.body, at: now });
    this.bySender.set(key, seen);
  }
}

// What the model reads. A ledger context knows the ids it holds (a transcript
// does); a plain one cannot tell (a command cannot).
export class Context {
  constructor(kind) {
    this.kind = kind;
    this.ids = new Set();
  }
  holds(id) {
    return this.kind === "ledger" && this.ids.has(id);
  }
  enter(id) {
    this.ids.add(id);
  }
}

// What was dropped or set aside, and why, never the body: log/drops.jsonl below the root.
function logDrop(root, address, letterName, message, why, now) {
  const line = { at: now, address, letter: letterName, from: message?.from.address ?? message?.from.name ?? null, reason: why.code };
  within((keep) => {
    const log = keep(keep(Folder.root(root)).child("log", { create: true }));
    const { O_WRONLY, O_APPEND, O_CREAT, O_NOFOLLOW } = fs.constants;
    log.writeNew("drops.jsonl", `${JSON.stringify(line)}\n`, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW);
  });
}

// One receiving process of a session. Between drains it keeps its loop guard and
// the claims of letters that entered but could not be unlinked: no receiver
// takes those, and their unlink is tried again first thing at the next drain.
export class Receiver {
  // `monotonic()`: ms on a clock that never steps, for the loop guard's windows
  // (SPEC 6.1); the wall clock (post.clock) only stamps the drop log.
  constructor(post, address, context, monotonic) {
    this.post = post;
    this.monotonic = monotonic;
    this.address = address;
    this.context = context;
    this.guard = new LoopGuard();
    this.unlinking = new Map(); // name → a kept claim {fd, info}
    this.started = false;
  }

  // One drain, a step at a time: it yields after each claim, so that receivers
  // can overlap. `accept(text)` is the context taking the text; `unlinkAllowed()`
  // is the disk letting an unlink happen. A context that fails ends the drain, so
  // that the order holds when it is tried again.
  *drain({ accept, unlinkAllowed, inbound, resume, crashAfterEntry }) {
    const report = { entered: [], dropped: [], set_aside: [] };
    const wakes = this.started || !stagesResumed(resume);
    this.started = true;
    const now = () => this.post.clock();
    this.retryUnlinks(unlinkAllowed);
    for (const claim of this.post.mailboxes.claims(this.address)) {
      yield;
      if (!claim.removable()) {
        claim.release(); // nothing enters that could not be removed afterwards: all of it waits
        break;
      }
      if (claim.rejected) {
        logDrop(this.post.root, this.address, claim.name, null, claim.rejected, now());
        if (claim.setAside()) report.set_aside.push({ name: claim.name, reason: claim.rejected });
        continue;
      }
      const message = claim.message;
      if (this.context.holds(message.id)) {
        this.finish(claim, unlinkAllowed); // it entered before; only the unlink was missing
        continue;
      }
      const drop = refusesInbound(inbound)
        ? reason("inbound_refused", "this session refuses inbound mail (PI_POST_INBOUND=refuse)")
        : this.guard.judge(message, this.monotonic());
      if (drop) {
        logDrop(this.post.root, this.address, claim.name, message, drop, now());
        this.finish(claim, unlinkAllowed);
        report.dropped.push({ name: claim.name, reason: drop });
        continue;
      }
      const text = frame(message);
      const onDisk = claim.stillThere();
      if (!accept(text)) {
        claim.release();
        break;
      }
      this.context.enter(message.id);
      this.guard.admit(message, this.monotonic());
      report.entered.push({ message, text, on_disk: onDisk, wake: wakes });
      if (crashAfterEntry) {
        claim.release();
        this.die();
        report.crashed = true;
        return report;
      }
      this.finish(claim, unlinkAllowed);
    }
    if (crashAfterEntry) report.crashed = false;
    return report;
  }

  // The receipt, or, when the disk refuses it, the claim kept for the next drain.
  finish(claim, unlinkAllowed) {
    if (unlinkAllowed()) {
      try {
        claim.dispose();
        return;
      } catch {}
    }
    this.unlinking.set(claim.name, claim.keep());
  }

  retryUnlinks(unlinkAllowed) {
    if (!this.unlinking.size) return;
    within((keep) => {
      const box = this.post.mailboxes.open(keep, this.address);
      for (const [name, held] of this.unlinking) {
        if (box && box.holds(name, held.info)) {
          if (!unlinkAllowed()) continue;
          try {
            fs.unlinkSync(box.at(name));
            box.fsync();
          } catch {
            continue;
          }
        }
        fs.closeSync(held.fd);
        this.unlinking.delete(name);
      }
    });
  }

  // As a process that dies: every claim ends with it.
  die() {
    for (const held of this.unlinking.values()) fs.closeSync(held.fd);
    this.unlinking.clear();
  }
}
