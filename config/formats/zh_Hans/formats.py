"""Simplified Chinese forms take and show dates as the pages write them, 2026-11-20: Django's
own zh_Hans formats put 2026/11/20 first, so the admin's date fields read unlike every other
date in the product. The other formats are Django's (FORMAT_MODULE_PATH reads this module
first, then Django's)."""

DATE_INPUT_FORMATS = [
    "%Y-%m-%d",  # '2026-11-20'
    "%Y/%m/%d",  # '2026/11/20'
]
DATETIME_INPUT_FORMATS = [
    "%Y-%m-%d %H:%M:%S",  # '2026-11-20 14:30:59'
    "%Y-%m-%d %H:%M:%S.%f",  # '2026-11-20 14:30:59.000200'
    "%Y-%m-%d %H:%M",  # '2026-11-20 14:30'
    "%Y/%m/%d %H:%M:%S",  # '2026/11/20 14:30:59'
    "%Y/%m/%d %H:%M",  # '2026/11/20 14:30'
]

# Shown as the pages write them, as in English (config/formats/en).
DATE_FORMAT = "Y-m-d"
DATETIME_FORMAT = "Y-m-d H:i"
SHORT_DATE_FORMAT = "Y-m-d"
SHORT_DATETIME_FORMAT = "Y-m-d H:i"
