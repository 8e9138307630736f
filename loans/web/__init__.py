"""The pages people read: views, their forms and charts. They ask loans.access who may see
what and read through loans.services; they hold no arithmetic of their own."""
