"""cutext.pipelines."""
