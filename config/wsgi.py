import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

from config.heap import settle  # noqa: E402
from config.static import require_collected  # noqa: E402 - needs the settings loaded

require_collected()

settle()  # config/heap.py: the garbage collector skips what was loaded at start
