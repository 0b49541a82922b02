/** The runs list's filter box as a server query: `src/ui/runs-filter.ts`, shared with `rankscope report --filter`. */
export { filterQuery } from "../runs-filter.js";
