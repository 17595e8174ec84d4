// The receiving side: take the mail of one session, through the inbound mode
// and the loop guard, into a context; the unlink comes only after.
import fs from "node:fs";
import { reason } from "./wire.mjs";
import { Folder, within } from "./disk.mjs";
import { frame } from "./frame.mjs";

export const REPEAT_MS = 10_000;
export const BURST_MS = 30_000;
export const BURST_CAP = 8;

// PI_POST_INBOUND: refuse, or accept (ask with no one to ask accepts; so does any other value).
export const inboundMode = (value) => (String(value ?? "").trim().toLowerCase() === "refuse" ? "refuse" : "accept");

// Per sender, over what entered the context: no identical body within 10 s, no 9th message within 30 s.
export class LoopGuard {
  constructor() {
    this.bySender = new Map();
  }
  static senderOf(message) {
    return message.from.address ?? `name:${message.from.name}`;
  }
  judge(message, now) {
    const seen = this.bySender.get(LoopGuard.senderOf(message));
    if (!seen) return null;
    const last = seen[seen.length - 1];
    if (last.body === message.body && now - last.at <= REPEAT_MS) {
      return reason("loop_guard", `the same body again from this sender within ${REPEAT_MS / 1000} s`, { rule: "repeat", within_ms: REPEAT_MS });
    }
    if (seen.filter((s) => now - s.at < BURST_MS).length >= BURST_CAP) {
      return reason("loop_guard", `more than ${BURST_CAP} messages from this sender within ${BURST_MS / 1000} s`, { rule: "burst", cap: BURST_CAP, within_ms: BURST_MS });
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

// What was dropped, and why, never the body: log/drops.jsonl below the root.
function logDrop(root, address, letterName, message, why, now) {
  const line = { at: now, address, letter: letterName, from: message?.from.address ?? message?.from.name ?? null, reason: why.code };
  within((keep) => {
    const log = keep(keep(Folder.root(root)).child("log", { create: true }));
    const { O_WRONLY, O_APPEND, O_CREAT, O_NOFOLLOW } = fs.constants;
    log.writeNew("drops.jsonl", `${JSON.stringify(line)}\n`, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW);
  });
}

export class ReceivingSession {
  constructor(post, address) {
    this.post = post;
    this.address = address;
    this.guard = new LoopGuard();
    this.held = new Set(); // the ids the context holds: a ledger
  }

  // One drain. `context(text, message)` returns true when it took the text.
  // A context that fails ends the drain, so that the order holds on the retry.
  drain({ context, inbound }) {
    const report = { entered: [], dropped: [], set_aside: [] };
    const now = () => this.post.clock();
    for (const claim of this.post.mailboxes.claims(this.address)) {
      if (claim.rejected) {
        logDrop(this.post.root, this.address, claim.name, null, claim.rejected, now());
        if (claim.setAside()) report.set_aside.push({ name: claim.name, reason: claim.rejected });
        continue;
      }
      const message = claim.message;
      if (this.held.has(message.id)) {
        claim.dispose(); // entered before, unlinked only now
        continue;
      }
      const drop = inboundMode(inbound) === "refuse"
        ? reason("inbound_refused", "this session refuses inbound mail (PI_POST_INBOUND=refuse)")
        : this.guard.judge(message, now());
      if (drop) {
        logDrop(this.post.root, this.address, claim.name, message, drop, now());
        claim.dispose();
        report.dropped.push({ name: claim.name, reason: drop });
        continue;
      }
      const text = frame(message);
      const onDisk = claim.stillThere();
      if (!context(text, message)) {
        claim.release();
        break;
      }
      this.held.add(message.id);
      this.guard.admit(message, now());
      claim.dispose();
      report.entered.push({ message, text, on_disk: onDisk });
    }
    return report;
  }
}
