/** Organization plans; the plan gates region and GPU choice (see domain rules). */
export const PLANS = ['free', 'hobbyist', 'start_up', 'enterprise'] as const;
export type Plan = (typeof PLANS)[number];

export function isPlan(v: string): v is Plan {
  return (PLANS as readonly string[]).includes(v);
}
