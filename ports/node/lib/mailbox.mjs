// Mailboxes: inbox/<address>/<id>.json. Deposit under the folder's lock, claim
// with a lock on the letter, set aside what is not a message.
import fs from "node:fs";
import path from "node:path";
import { LETTER_LIMIT, encodeMessage, idFor, isAddress, parseLetter, reason } from "./wire.mjs";
import {
  Refused, checkFolder, ensureFolder, failed, flock, fsyncFolder, jsonNames,
  lockFolder, openEntry, randomHex, readBounded,
} from "./disk.mjs";

export const MAILBOX_CAP = 50;

export function checkedAddress(address) {
  if (!isAddress(address)) {
    throw new Refused(reason("malformed_address", `${JSON.stringify(address)} is not an address (s- and 12 hex digits)`, { address }));
  }
  return address;
}

export class Mailboxes {
  constructor(root) {
    this.root = root;
    this.inbox = path.join(root, "inbox");
  }

  folder(address) {
    return path.join(this.inbox, checkedAddress(address));
  }

  // Does the mailbox folder exist (a real one)? A hostile one throws.
  exists(address) {
    return checkFolder(this.inbox) && checkFolder(this.folder(address));
  }

  names(address) {
    return this.exists(address) ? jsonNames(this.folder(address)) : [];
  }

  count(address) {
    return this.names(address).length;
  }

  // For listings: a mailbox that cannot be trusted counts as empty.
  countOrZero(address) {
    try {
      return this.count(address);
    } catch {
      return 0;
    }
  }

  addresses() {
    if (!checkFolder(this.inbox)) return [];
    return fs.readdirSync(this.inbox).filter(isAddress).sort();
  }

  // Write one message; refused with nothing written when the mailbox is full.
  deposit(address, { sentAt, from, replyTo, body }) {
    fs.mkdirSync(this.root, { recursive: true, mode: 0o700 });
    checkFolder(this.root);
    ensureFolder(this.inbox);
    const folder = this.folder(address);
    const lock = lockFolder(folder, { create: true });
    try {
      const queued = jsonNames(folder).length;
      if (queued >= MAILBOX_CAP) {
        throw new Refused(reason("mailbox_full", `mailbox ${address} already holds ${queued} letters; the cap is ${MAILBOX_CAP}`, { address, queued, cap: MAILBOX_CAP }));
      }
      for (;;) {
        const id = idFor(sentAt, randomHex(4));
        if (fs.existsSync(path.join(folder, `${id}.json`))) continue;
        const bytes = encodeMessage({ id, sentAt, from, replyTo, body });
        const temp = path.join(folder, `${id}.json.tmp`);
        let fd;
        try {
          fd = fs.openSync(temp, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, 0o600);
        } catch (e) {
          if (e.code === "EEXIST") continue;
          throw failed(`cannot write to mailbox ${address}: ${e.code}`, { address }, "cannot_write");
        }
        try {
          fs.writeSync(fd, bytes);
          fs.fsyncSync(fd);
          fs.closeSync(fd);
          fs.renameSync(temp, path.join(folder, `${id}.json`));
          fsyncFolder(folder);
        } catch (e) {
          fs.rmSync(temp, { force: true });
          throw failed(`cannot write to mailbox ${address}: ${e.code}`, { address }, "cannot_write");
        }
        return id;
      }
    } finally {
      lock.release();
    }
  }

  // What a reader sees, left in place: {name, message} | {name, rejected}.
  peek(address) {
    return this.names(address).map((name) => {
      const where = path.join(this.folder(address), name);
      const entry = openEntry(where);
      if (entry.missing) return null;
      if (!entry.fd) return { name, rejected: entryProblem(entry) };
      try {
        return { name, ...parseLetter(readBounded(entry.fd, LETTER_LIMIT), name) };
      } catch (e) {
        return { name, rejected: reason("unreadable", `cannot read it: ${e.code}`) };
      } finally {
        fs.closeSync(entry.fd);
      }
    }).filter(Boolean);
  }

  // Claims oldest first. Each claim holds an exclusive flock on its letter, so
  // racing receivers never take one letter twice; a letter held elsewhere is
  // skipped. The file stays at its name until dispose(): its disappearance is
  // the sender's receipt.
  *claims(address) {
    for (const name of this.names(address)) {
      const claim = this.claim(address, name);
      if (claim) yield claim;
    }
  }

  claim(address, name) {
    const where = path.join(this.folder(address), name);
    const entry = openEntry(where);
    if (entry.missing) return null;
    if (!entry.fd) {
      // Nothing to lock through a link or in a folder; the move itself is the claim.
      return new Claim(this, address, name, null, { rejected: entryProblem(entry) });
    }
    if (!flock(entry.fd, { wait: false })) {
      fs.closeSync(entry.fd);
      return null;
    }
    let still = null;
    try {
      still = fs.lstatSync(where);
    } catch {}
    if (!still || still.ino !== entry.info.ino || still.dev !== entry.info.dev) {
      fs.closeSync(entry.fd); // taken and removed by another receiver while we waited
      return null;
    }
    let parsed;
    try {
      parsed = parseLetter(readBounded(entry.fd, LETTER_LIMIT), name);
    } catch (e) {
      parsed = { rejected: reason("unreadable", `cannot read it: ${e.code}`) };
    }
    return new Claim(this, address, name, entry.fd, parsed);
  }
}

function entryProblem(entry) {
  if (entry.symlink) return reason("symlink", "a symlink, not a letter; it is not followed");
  if (entry.notFile) return reason("not_a_file", "not a regular file");
  return reason("unreadable", `cannot open it: ${entry.unreadable}`);
}

class Claim {
  constructor(mailboxes, address, name, fd, parsed) {
    Object.assign(this, { mailboxes, address, name, fd, ...parsed });
    this.path = path.join(mailboxes.folder(address), name);
  }

  stillThere() {
    try {
      fs.lstatSync(this.path);
      return true;
    } catch {
      return false;
    }
  }

  // The receipt: unlink, flush the folder, let go.
  dispose() {
    try {
      fs.unlinkSync(this.path);
      fsyncFolder(path.dirname(this.path));
    } finally {
      this.release();
    }
  }

  release() {
    if (this.fd !== null) fs.closeSync(this.fd);
    this.fd = null;
  }

  // Move the letter, whole, into quarantine/<address>/ with its reason beside it.
  setAside() {
    const root = this.mailboxes.root;
    const folder = path.join(root, "quarantine", this.address);
    try {
      ensureFolder(path.join(root, "quarantine"));
      ensureFolder(folder);
      let kept = this.name;
      while (fs.existsSync(path.join(folder, kept))) kept = `${this.name}.${randomHex(2)}`;
      const why = path.join(folder, `${kept}.reason`);
      fs.writeFileSync(why, `${JSON.stringify(this.rejected)}\n`, { mode: 0o600, flag: "wx" });
      try {
        fs.renameSync(this.path, path.join(folder, kept));
      } catch (e) {
        fs.rmSync(why, { force: true });
        if (e.code === "ENOENT") return false; // another receiver moved it first
        throw e;
      }
      fsyncFolder(folder);
      fsyncFolder(path.dirname(this.path));
      return true;
    } finally {
      this.release();
    }
  }
}
