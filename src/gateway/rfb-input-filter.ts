/**
 * Readonly live views: a parser of the RFB (VNC) client-to-server stream that forwards
 * everything a viewer needs to watch and drops every message that would act on the
 * session (keys, pointer, clipboard, desktop size, power actions). It works on the byte
 * stream, so it does not matter how websocket frames split messages. A message type it
 * does not know is a protocol error: the caller closes the connection rather than guess
 * its length. Pure: no I/O.
 */

type Stage = 'version' | 'security' | 'init' | 'messages';

/** Message type -> whether it acts on the session. */
const INPUT = new Set([4, 5, 6, 250, 251]);

export class RfbProtocolError extends Error {}

export class RfbInputFilter {
  private stage: Stage = 'version';
  private buf: Buffer = Buffer.alloc(0);
  /** Bytes of a dropped message still to come: discarded as they arrive, never held. */
  private skip = 0;
  /** Input messages dropped so far (for tests and logs). */
  dropped = 0;

  /** Bytes held back until the rest of their message arrives. */
  get buffered(): number {
    return this.buf.length;
  }

  /** Feeds client bytes; returns the bytes to forward to the VNC server (possibly empty). */
  push(chunk: Buffer): Buffer {
    if (this.skip > 0) {
      const n = Math.min(this.skip, chunk.length);
      this.skip -= n;
      chunk = chunk.subarray(n);
    }
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    const out: Buffer[] = [];
    for (;;) {
      const n = this.nextLength();
      if (n === null) break;
      if (this.buf.length < n) {
        // A dropped message is skipped as it streams in, so a ClientCutText announcing up
        // to 2 GiB cannot make a readonly viewer's connection buffer it whole.
        if (this.stage === 'messages' && this.isInput(this.buf)) {
          this.dropped++;
          this.skip = n - this.buf.length;
          this.buf = Buffer.alloc(0);
        }
        break;
      }
      const msg = this.buf.subarray(0, n);
      this.buf = this.buf.subarray(n);
      if (this.stage === 'messages' && this.isInput(msg)) this.dropped++;
      else out.push(msg);
      this.advance(msg);
    }
    return out.length === 1 ? out[0]! : Buffer.concat(out);
  }

  private isInput(msg: Buffer): boolean {
    const type = msg[0]!;
    return INPUT.has(type) || (type === 255 && msg[1] === 0);
  }

  private advance(msg: Buffer): void {
    if (this.stage === 'version') {
      const v = msg.toString('latin1');
      if (!/^RFB \d{3}\.\d{3}\n$/.test(v)) throw new RfbProtocolError('bad RFB version string');
      // RFB 3.3: the server picks the security type and the client sends no choice.
      this.stage = v === 'RFB 003.003\n' ? 'init' : 'security';
    } else if (this.stage === 'security') {
      // The VNC server runs without a password, so "None" (1) is the only type it offers.
      if (msg[0] !== 1) throw new RfbProtocolError(`security type ${msg[0]} is not offered`);
      this.stage = 'init';
    } else if (this.stage === 'init') {
      this.stage = 'messages';
    }
  }

  /** Length of the next whole unit at the head of the buffer, or null until enough bytes arrived to know it. */
  private nextLength(): number | null {
    const b = this.buf;
    if (b.length === 0) return null;
    switch (this.stage) {
      case 'version':
        return 12;
      case 'security':
      case 'init':
        return 1;
      case 'messages':
        break;
    }
    const type = b[0]!;
    switch (type) {
      case 0: // SetPixelFormat
        return 20;
      case 2: // SetEncodings
        return b.length < 4 ? null : 4 + 4 * b.readUInt16BE(2);
      case 3: // FramebufferUpdateRequest
        return 10;
      case 4: // KeyEvent
        return 8;
      case 5: // PointerEvent
        return 6;
      case 6: {
        // ClientCutText; a negative length marks the extended clipboard format.
        if (b.length < 8) return null;
        return 8 + Math.abs(b.readInt32BE(4));
      }
      case 150: // EnableContinuousUpdates
        return 10;
      case 248: // ClientFence
        return b.length < 9 ? null : 9 + b[8]!;
      case 250: // xvp
        return 4;
      case 251: // SetDesktopSize
        return b.length < 8 ? null : 8 + 16 * b[6]!;
      case 255: {
        // QEMU: extended key event is the only sub-message viewers send.
        if (b.length < 2) return null;
        if (b[1] === 0) return 12;
        throw new RfbProtocolError(`QEMU sub-message ${b[1]} is not supported`);
      }
      default:
        throw new RfbProtocolError(`unknown RFB client message type ${type}`);
    }
  }
}
