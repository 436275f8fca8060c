/**
 * What a service process's resident set is made of, as far as the process can tell: V8's heap by
 * space, memory outside it (Buffers, ArrayBuffers: PGlite's WASM memory is one), compiled code,
 * and the kernel's split of the resident set into anonymous and file-backed pages.
 */
import { readFileSync } from 'node:fs';
import v8 from 'node:v8';

const mib = 1024 * 1024;

export interface MemoryBreakdown {
  /** Name → MiB, in the order printed. */
  parts: [string, number][];
}

/** `/proc/self/status` lines in kB (Linux only; empty elsewhere). */
function procStatus(): Record<string, number> {
  try {
    const fields: Record<string, number> = {};
    for (const line of readFileSync('/proc/self/status', 'utf8').split('\n')) {
      const match = /^(\w+):\s+(\d+) kB/.exec(line);
      if (match) fields[match[1] as string] = Number(match[2]);
    }
    return fields;
  } catch {
    return {};
  }
}

/** The breakdown now; `wasmBytes` is the embedded store's WASM memory, when there is one. */
export function memoryBreakdown(wasmBytes?: number): MemoryBreakdown {
  const usage = process.memoryUsage();
  const status = procStatus();
  const code = v8.getHeapCodeStatistics();
  const parts: [string, number][] = [
    ['rss', usage.rss / mib],
    ['rss anonymous (kernel)', (status.RssAnon ?? Number.NaN) / 1024],
    ['rss file-backed (kernel)', (status.RssFile ?? Number.NaN) / 1024],
    ['v8 heap total', usage.heapTotal / mib],
    ['v8 heap used', usage.heapUsed / mib],
  ];
  for (const space of v8.getHeapSpaceStatistics()) {
    if (space.space_size < mib) continue;
    parts.push([`  ${space.space_name}: size`, space.space_size / mib]);
    parts.push([`  ${space.space_name}: used`, space.space_used_size / mib]);
  }
  parts.push(
    ['v8 code and metadata', (code.code_and_metadata_size + code.bytecode_and_metadata_size) / mib],
    ['external (outside the heap)', usage.external / mib],
    ['  of which ArrayBuffers', usage.arrayBuffers / mib],
  );
  if (wasmBytes !== undefined) parts.push(['  of which PGlite WASM memory', wasmBytes / mib]);
  return { parts };
}
