"""Pure arithmetic of the product: periods and their cost, burn-down and forecasts, the figures
of a period, commitment advice, buying against loaning. No ORM, no Django request, no task:
each function takes plain values and returns plain values, so it is tested without a
database."""
