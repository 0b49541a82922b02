// The rank module: its exported functions are what the controller calls on every rank.
import { currentRank, recordMetric, Reduce } from "rankscope";

export function myFn(): void {
  recordMetric("my_sum_rank_metric", currentRank().localRank, Reduce.SUM); // 0 or 1 per replica
}
