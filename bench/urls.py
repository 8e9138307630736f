from django.urls import path

from bench.baseline import BaselineSamples
from config.urls import urlpatterns as application

urlpatterns = [*application, path("bench/drf-samples", BaselineSamples.as_view())]
