// Mailboxes: inbox/<address>/<id>.json. Deposit under the folder's lock, claim
// with a lock on the letter, set aside what is not a message.
import fs from "node:fs";
import { LETTER_LIMIT, encodeMessage, idFor, isAddress, parseLetter, reason } from "./wire.mjs";
import { Folder, Refused, failed, flock, lockedChild, randomHex, readBounded, within } from "./disk.mjs";

export const MAILBOX_CAP = 50;

export function checkedAddress(address) {
  if (!isAddress(address)) {
    throw new Refused(reason("malformed_address", `${JSON.stringify(address)} is not an address (s- and 12 hex digits)`, { address }));
  }
  return address;
}

export const fullMailbox = (address, queued) =>
  new Refused(reason("mailbox_full", `mailbox ${address} already holds ${queued} letters; the cap is ${MAILBOX_CAP}`, { address, queued, cap: MAILBOX_CAP }));

export class Mailboxes {
  constructor(root) {
    this.root = root;
  }

  // The mailbox folder of an address, open, or null; kept open for the operation.
  open(keep, address, { create = false } = {}) {
    const root = keep(Folder.root(this.root, { create }));
    const inbox = root && keep(root.child("inbox", { create }));
    return inbox && keep(inbox.child(checkedAddress(address), { create }));
  }

  exists(address) {
    return within((keep) => this.open(keep, address) !== null);
  }

  // Is the letter of that id still in the mailbox? (Its absence is the receipt.)
  holds(address, id) {
    return within((keep) => this.open(keep, address)?.lstat(`${id}.json`) != null);
  }

  count(address) {
    return within((keep) => this.open(keep, address)?.jsonNames().length ?? 0);
  }

  // For listings: a mailbox that cannot be trusted counts as empty.
  countOrZero(address) {
    try {
      return this.count(address);
    } catch {
      return 0;
    }
  }

  // Write one message; refused with nothing written when the mailbox is full.
  deposit(address, { sentAt, from, replyTo, body }) {
    const cannotWrite = (code) => failed(`cannot write to mailbox ${address}: ${code}`, { address }, "cannot_write");
    return within((keep) => {
      let box;
      try {
        const root = keep(Folder.root(this.root, { create: true }));
        const inbox = keep(root.child("inbox", { create: true }));
        box = keep(lockedChild(inbox, checkedAddress(address), { create: true }));
      } catch (e) {
        if (e.errno) throw cannotWrite(e.errno); // a folder we may not make
        throw e;
      }
      const queued = box.jsonNames().length;
      if (queued >= MAILBOX_CAP) throw fullMailbox(address, queued);
      for (;;) {
        const id = idFor(sentAt, randomHex(4));
        if (box.lstat(`${id}.json`)) continue;
        try {
          box.writeDurably(`${id}.json.tmp`, `${id}.json`, encodeMessage({ id, sentAt, from, replyTo, body }));
        } catch (e) {
          if (e.code === "EEXIST") continue;
          throw cannotWrite(e.code);
        }
        return id;
      }
    });
  }

  // What a reader sees, left in place: {name, message} | {name, rejected}.
  peek(address) {
    return within((keep) => {
      const box = this.open(keep, address);
      if (!box) return [];
      return box.jsonNames().map((name) => {
        const found = box.entry(name);
        if (found.missing) return null;
        if (!found.fd) return { name, rejected: entryProblem(found) };
        try {
          return { name, ...parseLetter(readBounded(found.fd, LETTER_LIMIT), name) };
        } catch (e) {
          return { name, rejected: reason("unreadable", `cannot read it: ${e.code}`) };
        } finally {
          fs.closeSync(found.fd);
        }
      }).filter(Boolean);
    });
  }

  // Claims oldest first. Each claim holds an exclusive flock on its letter, so
  // racing receivers never take one letter twice; a letter held elsewhere is
  // skipped. The file stays at its name until dispose(): its disappearance is
  // the sender's receipt. Use each claim before asking for the next.
  *claims(address) {
    const opened = [];
    const keep = (folder) => (folder && opened.push(folder), folder);
    try {
      const box = this.open(keep, address);
      if (!box) return;
      const root = opened[0];
      for (const name of box.jsonNames()) {
        const claim = claimOf(root, box, address, name);
        if (claim) yield claim;
      }
    } finally {
      for (const folder of opened.reverse()) folder.close();
    }
  }
}

function claimOf(root, box, address, name) {
  const found = box.entry(name);
  if (found.missing) return null;
  if (!found.fd) {
    // Nothing to lock through a link or in a folder; the move itself is the claim.
    return new Claim(root, box, address, name, null, { rejected: entryProblem(found) });
  }
  if (!flock(found.fd, { wait: false }) || !box.holds(name, found.info)) {
    fs.closeSync(found.fd); // held by another receiver, or taken and removed while we looked
    return null;
  }
  let parsed;
  try {
    parsed = parseLetter(readBounded(found.fd, LETTER_LIMIT), name);
  } catch (e) {
    parsed = { rejected: reason("unreadable", `cannot read it: ${e.code}`) };
  }
  return new Claim(root, box, address, name, found.fd, parsed);
}

function entryProblem(found) {
  if (found.symlink) return reason("symlink", "a symlink, not a letter; it is not followed");
  if (found.notFile) return reason("not_a_file", "not a regular file");
  return reason("unreadable", `cannot open it: ${found.unreadable}`);
}

class Claim {
  constructor(root, box, address, name, fd, parsed) {
    Object.assign(this, { root, box, address, name, fd, ...parsed });
  }

  // Could this process unlink it? (The kernel asked, with our effective ids.)
  removable() {
    try {
      fs.accessSync(`/proc/self/fd/${this.box.fd}`, fs.constants.W_OK | fs.constants.X_OK);
      return true;
    } catch {
      return false;
    }
  }

  stillThere() {
    return this.box.lstat(this.name) !== null;
  }

  // The receipt: unlink, flush the folder, let go. An unlink that fails throws
  // with the claim still held.
  dispose() {
    fs.unlinkSync(this.box.at(this.name));
    try {
      this.box.fsync();
    } finally {
      this.release();
    }
  }

  release() {
    if (this.fd !== null) fs.closeSync(this.fd);
    this.fd = null;
  }

  // Hand the locked letter over to be kept past this drain: {fd, info}.
  keep() {
    const kept = { fd: this.fd, info: fs.fstatSync(this.fd) };
    this.fd = null;
    return kept;
  }

  // Move the letter, whole, into quarantine/<address>/ with its reason beside it.
  // False when another receiver moved it first.
  setAside() {
    try {
      return within((keep) => {
        const quarantine = keep(this.root.child("quarantine", { create: true }));
        const folder = keep(quarantine.child(this.address, { create: true }));
        let kept = this.name;
        while (folder.lstat(kept) || folder.lstat(`${kept}.reason`)) kept = `${this.name}.${randomHex(2)}`;
        folder.writeNew(`${kept}.reason`, `${JSON.stringify(this.rejected)}\n`);
        try {
          fs.renameSync(this.box.at(this.name), folder.at(kept));
        } catch (e) {
          fs.rmSync(folder.at(`${kept}.reason`), { force: true });
          if (e.code === "ENOENT") return false;
          throw e;
        }
        folder.fsync();
        this.box.fsync();
        return true;
      });
    } finally {
      this.release();
    }
  }
}
