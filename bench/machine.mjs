// The line every benchmark table starts with: which CPU it was measured on (a ratio holds only for
// the CPU it was measured on; these machines are AMD EPYC or Intel Xeon, whose model names alone
// do not tell their generations apart: the family and model numbers do).
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';

/** "family F model M" from /proc/cpuinfo, or null where there is none. */
function generation() {
  try {
    const info = readFileSync('/proc/cpuinfo', 'utf8');
    const field = (name) => new RegExp(`^${name}\\s*:\\s*(\\d+)`, 'm').exec(info)?.[1];
    const [family, model] = [field('cpu family'), field('model')];
    return family && model ? `family ${family} model ${model}` : null;
  } catch {
    return null;
  }
}

/** "CPU: <model name> (family F model M), N logical cores". */
export function cpuLine() {
  const gen = generation();
  return `CPU: ${cpus()[0]?.model?.trim() || 'unknown CPU'}${gen ? ` (${gen})` : ''}, ${cpus().length} logical cores`;
}
