// A post office: a root, a clock and a process table. Sending, resolving,
// listing and sweeping.
import fs from "node:fs";
import path from "node:path";
import { BODY_CAP, addressOf, defaultName, isAddress, isWellFormed, reason, utf8Length } from "./wire.mjs";
import { Folder, Refused, lockedChild, within } from "./disk.mjs";
import { MAILBOX_CAP, Mailboxes, fullMailbox } from "./mailbox.mjs";
import { Registry, presenceOf } from "./registry.mjs";

export const TARGET_CAP = 8;
const DAY_MS = 86_400_000;
const SWEEP_RECORD_MS = 7 * DAY_MS;
const STALE_TEMP_MS = 36 * 3_600_000;
const REACHABLE_SHOWN = 8;
const RANK = { live: 0, stalled: 1, offline: 2 };

// An absolute path with its symlinks resolved, as far as it exists.
export function canonical(where) {
  let head = path.resolve(where);
  const tail = [];
  for (;;) {
    try {
      return path.join(fs.realpathSync(head), ...tail);
    } catch {
      if (head === "/") return path.resolve(where);
      tail.unshift(path.basename(head));
      head = path.dirname(head);
    }
  }
}

// A body is refused before anything else is looked at (SPEC 3.1 step 1).
export function checkBody(body) {
  if (!isWellFormed(body)) throw new Refused(reason("body_not_text", "the body is not text (it holds unpaired surrogates)"));
  if (body.trim() === "") throw new Refused(reason("empty_body", "nothing to send: the body is empty"));
  const size = utf8Length(body);
  if (size > BODY_CAP) {
    throw new Refused(reason("body_too_large", `the body weighs ${size} bytes, over the cap of ${BODY_CAP}; send a path instead`, { size, cap: BODY_CAP }));
  }
}

const isPathHandle = (h) => h === "~" || h === "." || h === ".." || h.startsWith("~/") || h.includes("/");

export class PostOffice {
  constructor({ root, clock, processes }) {
    this.root = root;
    this.clock = clock; // () => ms since the epoch
    this.processes = processes;
    this.mailboxes = new Mailboxes(root);
    this.registry = new Registry(root);
  }

  checkRoot() {
    within((keep) => keep(Folder.root(this.root)));
  }

  // What listings and lookups say of a session.
  session(address, record) {
    return {
      address,
      record,
      presence: record ? presenceOf(record, this.processes, this.clock()) : null,
      queued: this.mailboxes.countOrZero(address),
    };
  }

  sessions() {
    const now = this.clock();
    return this.registry
      .all()
      .map((record) => this.session(record.address, record))
      .sort((a, b) =>
        RANK[a.presence] - RANK[b.presence] ||
        b.record.lastSeen - a.record.lastSeen ||
        (a.record.name < b.record.name ? -1 : a.record.name > b.record.name ? 1 : 0) ||
        (a.address < b.address ? -1 : 1))
      .map((s) => ({ ...s, hidden: s.presence === "offline" && now - s.record.lastSeen > DAY_MS && s.queued === 0 }));
  }

  list({ all }) {
    const every = this.sessions();
    const shown = every.filter((s) => all || !s.hidden).map(({ hidden, ...s }) => s);
    return { sessions: shown, hidden: every.length - shown.length };
  }

  // -- resolution --------------------------------------------------------------

  resolve(handle, { cwd, home }) {
    this.checkRoot();
    if (isAddress(handle)) {
      const record = this.registry.read(handle);
      // pi-post 0.7 would make the mailbox; mail for an address nobody had would wait for ever.
      if (!record && !this.mailboxes.exists(handle)) {
        throw new Refused(reason("unknown_address", `${handle} is no session's: it has neither a record nor a mailbox`, { address: handle }));
      }
      return this.session(handle, record);
    }
    const sessions = this.sessions();
    const live = (s) => s.presence !== "offline";
    const decide = (matches) => {
      const running = matches.filter(live);
      const chosen = running.length ? running : matches;
      if (chosen.length === 1) {
        const { hidden, ...session } = chosen[0];
        return session;
      }
      const candidates = chosen.map((s) => s.address);
      const shown = chosen.map((s) => `${s.record.name} (${s.address}) — ${s.record.cwd}`).join("; ");
      throw new Refused(reason("ambiguous_target", `${JSON.stringify(handle)} could be any of ${chosen.length} sessions: ${shown}; name one by its address`, { handle, candidates }));
    };
    const unknown = (text, facts = {}) => {
      const running = sessions.filter(live);
      const offered = (running.length ? running : sessions).slice(0, REACHABLE_SHOWN);
      const reachable = offered.map((s) => s.address);
      const offer = offered.length ? `; sessions you can reach: ${offered.map((s) => `${s.record.name} (${s.address})`).join(", ")}` : "";
      return new Refused(reason("unknown_target", `${text}${offer}`, { handle, reachable, ...facts }));
    };
    if (isPathHandle(handle)) {
      const expanded = handle === "~" ? home : handle.startsWith("~/") ? path.join(home, handle.slice(2)) : handle;
      const where = canonical(path.resolve(cwd, expanded));
      const matches = sessions.filter((s) => s.record.cwd === where || canonical(s.record.cwd) === where);
      if (!matches.length) throw unknown(`no session runs in ${where}`, { path: where });
      return decide(matches);
    }
    const exact = sessions.filter((s) => s.record.sessionId === handle);
    if (exact.length) return decide(exact);
    if (/^[0-9a-fA-F]{8}[0-9a-fA-F-]*$/.test(handle)) {
      const prefix = handle.toLowerCase();
      const byId = sessions.filter((s) => s.record.sessionId.toLowerCase().startsWith(prefix));
      if (byId.length) return decide(byId);
    }
    const byName = sessions.filter((s) => s.record.name === handle || defaultName(s.record.cwd, s.address) === handle);
    if (byName.length) return decide(byName);
    const byFolder = sessions.filter((s) => path.basename(s.record.cwd) === handle);
    if (byFolder.length) return decide(byFolder);
    throw unknown(`nothing answers to ${JSON.stringify(handle)}: it is no address, session id, name or directory of a session`);
  }

  // -- sending -------------------------------------------------------------------

  // The sender: a session (by id) signs with its address; anything else is a process.
  sender({ session, label, cwd }) {
    if (session !== undefined) {
      const address = addressOf(session);
      const record = this.registry.read(address);
      const where = record ? record.cwd : canonical(cwd);
      return { kind: "session", name: record ? record.name : defaultName(where, address), address, cwd: where };
    }
    return { kind: "process", name: label ?? `process:${path.basename(path.resolve(cwd)) || "/"}`, cwd };
  }

  // `awaitTaken(letters)`, when given, waits for the letters of live targets to
  // vanish (SPEC 3.2) and returns the ids that did; without it nothing is awaited
  // (the shim's receivers run only when asked) and every receipt says queued.
  send({ targets, body, cwd, home, session, label, replyTo, awaitTaken }) {
    checkBody(body);
    if (!targets.length) throw new Refused(reason("no_targets", "no target given"));
    if (targets.length > TARGET_CAP) {
      throw new Refused(reason("too_many_targets", `${targets.length} targets; one send reaches at most ${TARGET_CAP}`, { count: targets.length, cap: TARGET_CAP }));
    }
    if (label !== undefined && (label === "" || !isWellFormed(label))) throw new Refused(reason("bad_envelope", "the sender's name must be non-empty text", { field: "from.name" }));
    if (replyTo !== undefined && replyTo !== "none" && !isAddress(replyTo)) {
      throw new Refused(reason("bad_envelope", "reply_to must be an address or none", { field: "replyTo" }));
    }
    const from = this.sender({ session, label, cwd });
    const reply = replyTo === "none" ? undefined : replyTo ?? (from.kind === "session" ? from.address : undefined);
    const addresses = [];
    const live = new Set(); // live when resolved: only their letters can be delivered
    for (const handle of targets) {
      const { address, presence } = this.resolve(handle, { cwd, home });
      if (!addresses.includes(address)) addresses.push(address);
      if (presence === "live") live.add(address);
    }
    // Every mailbox is counted before the first letter is written, and again
    // under its lock by the deposit itself.
    for (const address of addresses) {
      const queued = this.mailboxes.count(address);
      if (queued >= MAILBOX_CAP) throw fullMailbox(address, queued);
    }
    const sentAt = this.clock();
    const receipts = [];
    for (const address of addresses) {
      try {
        const id = this.mailboxes.deposit(address, { sentAt, from, replyTo: reply, body });
        receipts.push({ address, id, delivered: false });
      } catch (e) {
        // A letter once deposited is never taken back: say which went in.
        if (receipts.length && e.reason) {
          e.reason.already_queued = receipts.map(({ address: a, id }) => ({ address: a, id }));
          e.reason.text += `; already queued: ${receipts.map((r) => `${r.id} for ${r.address}`).join(", ")}`;
        }
        throw e;
      }
    }
    const awaited = receipts.filter((r) => live.has(r.address));
    if (awaitTaken && awaited.length) {
      const taken = awaitTaken(awaited.map(({ address, id }) => ({ address, id })));
      for (const receipt of awaited) receipt.delivered = taken.has(receipt.id);
    }
    return receipts;
  }

  // -- sweeping ------------------------------------------------------------------

  sweep() {
    const now = this.clock();
    const removed = { records_removed: [], mailboxes_removed: [], temporaries_removed: [] };
    const expired = (record) => presenceOf(record, this.processes, now) === "offline" && now - record.lastSeen > SWEEP_RECORD_MS;
    const records = new Map(this.registry.all().map((r) => [r.address, r]));
    const staleTemps = (folder, below) => {
      for (const name of folder.names().filter((n) => n.endsWith(".tmp"))) {
        const info = folder.lstat(name, { bigint: true });
        if (info?.isFile() && BigInt(now) * 1_000_000n - info.mtimeNs > BigInt(STALE_TEMP_MS) * 1_000_000n) {
          fs.unlinkSync(folder.at(name));
          removed.temporaries_removed.push(`${below}/${name}`);
        }
      }
    };
    within((keep) => {
      const root = keep(Folder.root(this.root));
      if (!root) return;
      const registry = keep(root.child("registry"));
      if (registry) staleTemps(registry, "registry");
      const inbox = keep(root.child("inbox"));
      for (const address of inbox ? inbox.names().filter(isAddress).sort() : []) {
        within((keepBox) => {
          let box;
          try {
            box = keepBox(lockedChild(inbox, address, { create: false }));
          } catch {
            return; // a mailbox we cannot trust is left alone
          }
          if (!box) return;
          staleTemps(box, `inbox/${address}`);
          // Read again under the lock: the session may have registered since the
          // first look (SPEC 5), and its new record is the one to judge.
          const record = this.registry.read(address);
          records.delete(address);
          if (record && box.names().length === 0 && expired(record)) {
            this.registry.remove(address);
            removed.records_removed.push(address);
          } else if (record) {
            return; // named by a record: kept
          }
          try {
            fs.rmdirSync(inbox.at(address)); // fails on anything still inside: mail outranks tidiness
            removed.mailboxes_removed.push(address);
          } catch {}
        });
      }
      for (const address of records.keys()) {
        const record = this.registry.read(address); // as it is now, not as first read
        if (record && !inbox?.lstat(address) && expired(record)) {
          this.registry.remove(address);
          removed.records_removed.push(address);
        }
      }
    });
    return removed;
  }
}
