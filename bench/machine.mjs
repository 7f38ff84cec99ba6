// The line every benchmark table starts with: which CPU it was measured on (a ratio holds only for
// the CPU it was measured on; these machines are AMD EPYC or Intel Xeon).
import { cpus } from 'node:os';

/** "CPU: <model name>, N logical cores". */
export function cpuLine() {
  return `CPU: ${cpus()[0]?.model?.trim() || 'unknown CPU'}, ${cpus().length} logical cores`;
}
