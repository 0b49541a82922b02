/** The keys of the scale benchmark: mixed reductions, mostly the arithmetic ones (as a training job's are). */
export function scaleKeys(count: number): Array<{ key: string; reduce: string }> {
  const mix = [
    "mean",
    "mean",
    "mean",
    "mean",
    "mean",
    "mean",
    "mean",
    "mean",
    "sum",
    "sum",
    "sum",
    "sum",
    "max",
    "max",
    "max",
    "min",
    "min",
    "min",
    "std",
    "quantiles",
  ];
  return Array.from({ length: count }, (_v, k) => ({
    key: `train/layer_${Math.floor(k / 8)}/metric_${k % 8}`,
    reduce: mix[k % mix.length] as string,
  }));
}
