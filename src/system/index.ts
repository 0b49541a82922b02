/** The system and GPU monitor, on its own x-axis. */
export { SystemMonitor, startSystemMonitor, SYSTEM_AXIS, type SystemMonitorOptions } from "./monitor.js";
export { parseNvidiaSmi, queryNvidiaSmi, NVIDIA_SMI_ARGS, type GpuSample, type NvidiaSmiResult } from "./nvidia-smi.js";
