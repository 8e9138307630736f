"""English pages and the admin show dates as every other page writes them, 2026-09-06 and
2026-09-06 14:30: Django's own English formats wrote "Sept. 6, 2026" in the admin. The input
formats and the rest are Django's (FORMAT_MODULE_PATH reads this module first)."""

DATE_FORMAT = "Y-m-d"
DATETIME_FORMAT = "Y-m-d H:i"
SHORT_DATE_FORMAT = "Y-m-d"
SHORT_DATETIME_FORMAT = "Y-m-d H:i"
