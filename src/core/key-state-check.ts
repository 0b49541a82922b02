/**
 * The check of a metric state that arrived from another process (a rank's flush answer, a host
 * agent's frame): its key and reduce name bounded, its `v` and `count`, then the reduction's own
 * shape (`ReduceDefinition.check`). What fails is dropped by the receiver and counted by kind, so a
 * corrupted or hostile state never reaches a merge or a backend.
 */
import { getReduceDefinition } from "./registry.js";
import { describe, isCount } from "./accumulators/state-check.js";
import { isRecord } from "./json.js";
import { STRING_LIMITS, stringProblem } from "./string-limits.js";

/** Longest reduce name accepted from another process (`quantiles(0.5,0.9,…)` included). */
const MAX_REDUCE_NAME_LENGTH = 256;

/** Why a received state is refused: a name out of bounds, or a state that does not fit its reduction. */
interface StateProblem {
  readonly kind: "invalidName" | "invalidState" | "malformed";
  readonly problem: string;
}

type Check = (state: Readonly<Record<string, unknown>>) => string | undefined;

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

/** What is wrong with a key name received from another process, or undefined. */
export function keyNameProblem(key: unknown): string | undefined {
  if (typeof key !== "string" || key.length === 0) return "its key must be a non-empty string";
  const problem = stringProblem(key, STRING_LIMITS.name);
  return problem === undefined ? undefined : `its key ${problem}`;
}

/** What is wrong with a reduce name received from another process, or undefined (unknown names are the reduce step's to report). */
export function reduceNameProblem(reduce: unknown): string | undefined {
  if (typeof reduce !== "string" || reduce.length === 0) return "its reduce must be a non-empty string";
  if (reduce.length > MAX_REDUCE_NAME_LENGTH)
    return `its reduce name is ${reduce.length} characters long (at most ${MAX_REDUCE_NAME_LENGTH})`;
  return CONTROL.test(reduce) ? "its reduce name contains a control character" : undefined;
}

/**
 * Checks the states of one received message (or frame), looking each reduce name up once: a flush
 * answer holds thousands of states of a few reductions. A state of a reduction this process does
 * not know is checked for `v` and `count` only (the reduce step reports the unknown name itself).
 */
export class ReceivedStates {
  /** Per reduce name: its check (null: none, or unknown here), or what is wrong with the name. */
  private readonly byReduce = new Map<string, Check | null | string>();

  /** What is wrong with one received `{ key, reduce, state }`, or undefined when it is valid. */
  problem(key: unknown, reduce: unknown, state: unknown): StateProblem | undefined {
    if (typeof key !== "string" || typeof reduce !== "string")
      return { kind: "malformed", problem: "a state must carry a key and a reduce name" };
    const keyProblem = keyNameProblem(key);
    if (keyProblem !== undefined) return { kind: "invalidName", problem: keyProblem };
    const check = this.checkOf(reduce);
    if (typeof check === "string") return { kind: "invalidName", problem: check };
    if (!isRecord(state)) return { kind: "invalidState", problem: "its state must be an object" };
    if (typeof state["v"] !== "number")
      return { kind: "invalidState", problem: `its state's v must be a number, got ${describe(state["v"])}` };
    if (!isCount(state["count"]))
      return {
        kind: "invalidState",
        problem: `its state's count must be a finite number ≥ 0, got ${describe(state["count"])}`,
      };
    const problem = check === null ? undefined : check(state);
    return problem === undefined
      ? undefined
      : { kind: "invalidState", problem: `its ${String(reduce)} state is not valid: ${problem}` };
  }

  private checkOf(reduce: string): Check | null | string {
    let found = this.byReduce.get(reduce);
    if (found === undefined) {
      found = reduceNameProblem(reduce) ?? definitionCheck(reduce);
      this.byReduce.set(reduce, found);
    }
    return found;
  }
}

function definitionCheck(reduce: string): Check | null {
  try {
    return getReduceDefinition(reduce).check ?? null;
  } catch {
    return null;
  }
}
