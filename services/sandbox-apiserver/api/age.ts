// A duration as kubectl's AGE column prints it (the rounding of apimachinery's HumanDuration, written here from its
// documented output): seconds up to 2 minutes, then minutes(+seconds) up to 10 minutes, minutes up to 3 hours,
// hours(+minutes) up to 8 hours, hours up to 2 days, days(+hours) up to 8 days, days up to 2 years, then years(+days).

/** `ms` as `42s`, `5m3s`, `3h10m`, `4d2h`, `2y10d`; a small negative skew is `0s`, a larger one `<invalid>`. */
export function humanAge(ms: number): string {
  const seconds = Math.trunc(ms / 1000); // toward zero, as Go converts a float to int
  if (seconds < -1) return "<invalid>";
  if (seconds < 0) return "0s";
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 10) return seconds % 60 === 0 ? `${minutes}m` : `${minutes}m${seconds % 60}s`;
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 8) return minutes % 60 === 0 ? `${hours}h` : `${hours}h${minutes % 60}m`;
  if (hours < 48) return `${hours}h`;
  const days = Math.floor(hours / 24);
  if (hours < 24 * 8) return hours % 24 === 0 ? `${days}d` : `${days}d${hours % 24}h`;
  if (hours < 24 * 365 * 2) return `${days}d`;
  const years = Math.floor(days / 365);
  if (hours < 24 * 365 * 8) return days % 365 === 0 ? `${years}y` : `${years}y${days % 365}d`;
  return `${years}y`;
}
